//! Feeding frames from Rust: the run layer's feed protocol without the
//! Python module. Frames of an odd size are handed in (host memory through
//! the mailbox; GPU memory through the [`Feeder`], straight into the shared
//! buffer or into a slot), consumed by a fed run, written by the PNG pool,
//! and read back from the files: every pixel must be the one put, and the
//! validation layer (on, with sync validation if the environment asks for
//! it) must have said nothing.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use ash::vk;
use cudarc::driver::DevicePtr;
use vkcuda::vk::device::Queue;
use vkcuda::{Format, FrameDesc, Layout};
use vkcuda_run::base::kinds::ProducerKind;
use vkcuda_run::drive::feed::client::{DeviceFeed, Feeder, Source};
use vkcuda_run::drive::feed::device::{DeviceStaging, Packing};
use vkcuda_run::drive::feed::line::{Line, Made};
use vkcuda_run::drive::feed::run::{spawn, Ended, Fed, Output, Progress, StartAt};
use vkcuda_run::drive::feed::{Feed, Mailbox, Put};
use vkcuda_run::drive::sink::frame_file_name;
use vkcuda_run::frames::gpu::{open_gpu, vulkan_instance, DeviceChoice, Gpu};
use vkcuda_run::output::frame_file::decode_frame;

const WIDTH: u32 = 37;
const HEIGHT: u32 = 23;
const FRAMES: u8 = 7;
/// The longest a test waits for the run to reach a state.
const PATIENCE: Duration = Duration::from_secs(60);
/// How often it looks again meanwhile (not spinning: lavapipe needs the cores).
const POLL: Duration = Duration::from_millis(1);

fn open(producer: ProducerKind) -> Result<Arc<Gpu>> {
    let instance = vulkan_instance(true, &[])?;
    let queue = Queue { kind: vkcuda::types::QueueKind::Graphics, present: None };
    let choice = DeviceChoice { gpu: None, producer, announce: false };
    Ok(Arc::new(open_gpu(&choice, instance, queue)?))
}

/// Frame `i`'s pixel at (x, y), RGB (the alpha is opaque).
fn pixel(i: u8, x: u32, y: u32) -> [u8; 3] {
    [(x * 7) as u8 ^ i, (y * 11) as u8, i.wrapping_mul(31)]
}

/// Frame `i` with `channels` channels (3: RGB, 4: RGBA with an opaque alpha).
fn frame(i: u8, channels: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity((WIDTH * HEIGHT) as usize * channels);
    for y in 0..HEIGHT {
        for x in 0..WIDTH {
            out.extend_from_slice(&pixel(i, x, y)[..3]);
            if channels == 4 {
                out.push(255);
            }
        }
    }
    out
}

fn desc() -> FrameDesc {
    FrameDesc::new(vk::Extent2D { width: WIDTH, height: HEIGHT }).format(Format::Rgba8).layout(Layout::Buffer)
}

/// A fresh folder for one test's frames.
fn folder(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vkcuda-feed-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    dir
}

/// Every frame in `dir` is the RGBA of the frame put; the folder goes.
fn check_written(dir: &PathBuf, ended: Ended) {
    assert_eq!((ended.consumed, ended.written), (u64::from(FRAMES), u64::from(FRAMES)), "{ended:?}");
    for i in 0..FRAMES {
        let bytes =
            std::fs::read(dir.join(frame_file_name(u64::from(i), Format::Rgba8))).expect("frame written");
        let decoded = decode_frame(&bytes, Format::Rgba8).expect("a PNG");
        let (size, pixels) = (decoded.size, decoded.pixels);
        assert_eq!((size.width, size.height), (WIDTH, HEIGHT));
        let wrong = pixels.iter().zip(frame(i, 4)).filter(|(a, b)| **a != *b).count();
        assert_eq!(wrong, 0, "frame {i}: {wrong} bytes differ from what was put");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn host_frames_fed_from_rust_are_written_as_put() {
    let gpu = open(ProducerKind::Cpu).expect("a Vulkan device (lavapipe or a GPU) with the validation layer");
    let mailbox = Mailbox::new();
    let dir = folder("host");
    let output = Output { dir: Some(dir.clone()), workers: 2, watchers: None };
    let progress = Arc::new(Progress::default());
    let fed = Fed { feed: Feed::Host(mailbox.clone()), progress: progress.clone() };
    let run = spawn(gpu.clone(), desc(), fed, output, StartAt { first: 0, base: 0 }).expect("the run starts");
    for i in 0..FRAMES {
        // Every frame: each put waits until the one before was taken.
        let put = mailbox.put(frame(i, 4), true, &|| false).expect("the run takes frames");
        assert!(matches!(put, Put::Done(None)), "frame {i} replaced another");
    }
    // While the run goes on (its mailbox open), its progress counts every frame.
    let all = u64::from(FRAMES);
    let started = Instant::now();
    while (progress.consumed(), progress.written()) != (all, all) {
        assert!(progress.written() <= progress.consumed() && progress.consumed() <= all);
        assert!(
            started.elapsed() < PATIENCE,
            "consumed {}, written {}",
            progress.consumed(),
            progress.written()
        );
        std::thread::sleep(POLL);
    }
    mailbox.close();
    let ended = run.join().expect("the consumer thread").expect("the run ends cleanly");
    check_written(&dir, ended);
    let v = gpu.device.validation();
    assert_eq!((v.errors, v.warnings), (0, 0), "validation messages");
}

/// GPU frames: made straight into the shared buffer (every frame: waiting
/// for Vulkan's release), the last one packed into a slot the producer
/// copies in (the path of `show` when the buffer is still Vulkan's).
#[test]
#[ignore = "needs an NVIDIA GPU with CUDA: cargo test --release -p vkcuda-run --test feed -- --ignored"]
fn gpu_frames_fed_from_rust_are_written_as_put() {
    let gpu = open(ProducerKind::Auto).expect("a Vulkan device");
    assert!(
        gpu.cuda.is_some(),
        "no CUDA device matches {}: this test needs an NVIDIA GPU",
        gpu.device.info()
    );
    let dir = folder("gpu");
    fed_from_gpu(&gpu, &dir).expect("frames fed from GPU memory");
    let v = gpu.device.validation();
    assert_eq!((v.errors, v.warnings), (0, 0), "validation messages");
}

fn fed_from_gpu(gpu: &Arc<Gpu>, dir: &PathBuf) -> Result<()> {
    let cache = dir.join("ptx");
    let mut feeder = Feeder::new(gpu, &cache)?;
    let ctx = feeder.context().clone();
    let (mailbox, line) = (Mailbox::new(), Line::new());
    let staging = DeviceStaging::new(ctx.clone(), desc().bytes() as usize)?;
    let feed = DeviceFeed { mailbox: mailbox.clone(), staging: staging.clone(), line: line.clone() };
    let fed = Feed::Device { mailbox: mailbox.clone(), staging, line };
    let output = Output { dir: Some(dir.clone()), workers: 2, watchers: None };
    let start = StartAt { first: 0, base: 0 };
    let run = spawn(gpu.clone(), desc(), Fed { feed: fed.clone(), progress: Arc::default() }, output, start)?;
    let stream = ctx.default_stream();
    let w = i64::from(WIDTH);
    let packing = Packing {
        strides: [w * 3, 3, 1],
        channels: 3,
        size: 1,
        width: WIDTH as i32,
        height: HEIGHT as i32,
        opaque: 255,
    };
    for i in 0..FRAMES {
        let memory = stream.clone_htod(&frame(i, 3))?;
        let (pointer, _sync) = memory.device_ptr(&stream);
        let source = Source { pointer, packing };
        if i + 1 < FRAMES {
            // SAFETY: the default stream is of the feeder's context; `memory` outlives the pack
            // (the stream is synchronized below before it goes).
            let made = unsafe { feeder.make(&feed, &source, stream.cu_stream(), true, &|| false) }?;
            anyhow::ensure!(made == Made::Made, "frame {i}: {made:?}");
        } else {
            let held = vkcuda_run::drive::feed::client::take_slot(&feed, &|| false)?;
            // SAFETY: as above.
            unsafe { feeder.pack(&held, &source, stream.cu_stream()) }?;
            match held.mailbox.put(held.slot, true, &|| false)? {
                Put::Done(None) => {}
                other => {
                    return Err(anyhow!(
                        "frame {i}: the slot was not put alone ({})",
                        matches!(other, Put::GaveUp(_))
                    ))
                }
            }
        }
        stream.synchronize()?;
    }
    fed.close();
    let ended = run.join().map_err(|_| anyhow!("the consumer thread panicked"))??;
    check_written(dir, ended);
    Ok(())
}
