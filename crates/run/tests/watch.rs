//! The watchers' compute draw (`present::watch`, shaders/draw.wgsl) against
//! the CPU reference: julia frames of an odd size fed from Rust in every
//! format (the buffer layout, as the Python module feeds them), drawn for
//! watchers magnified, minified and at their own size, as RGBA8 rows and as
//! I420 planes in both ranges. RGBA8 must be within the draw pass's
//! tolerance of the reference; I420 must be the reference's pixels put
//! through BT.601 in integers (what the shader does) within the same levels,
//! and its padding must repeat the last column and row. The validation layer
//! (on, with synchronization validation) must say nothing.

use std::sync::{Arc, Mutex};

use ash::vk;
use vkcuda::vk::device::Queue;
use vkcuda::{Format, FrameDesc, Layout};
use vkcuda_run::base::kinds::ProducerKind;
use vkcuda_run::drive::feed::run::{spawn, Fed, Output, StartAt};
use vkcuda_run::drive::feed::{Feed, Mailbox, Put};
use vkcuda_run::frames::gpu::{open_gpu, vulkan_instance, DeviceChoice, Gpu};
use vkcuda_run::present::readback::{Pixels, ReadFrame, I420};
use vkcuda_run::present::watch::{Want, Watchers, MAX_SIZES};
use vkcuda_run::scene::{drawn_reference, render_cpu_as, Diff, FrameArgs, Scene, SceneKind};

const FRAME: (u32, u32) = (37, 23);
const FRAMES: u32 = 5;
/// Magnified (odd both ways), minified, and the frame's own size.
const TARGETS: [(u32, u32); 3] = [(61, 43), (19, 13), FRAME];

fn open() -> Arc<Gpu> {
    let instance = vulkan_instance(true, &[]).expect("Vulkan with the validation layer");
    let queue = Queue { kind: vkcuda::types::QueueKind::Compute, present: None };
    let choice = DeviceChoice { gpu: None, producer: ProducerKind::Cpu, announce: false };
    Arc::new(open_gpu(&choice, instance, queue).expect("a Vulkan device (lavapipe or a GPU)"))
}

/// Watchers that want every frame at every target, in every layout, and keep what they get.
#[derive(Default)]
struct Keep {
    got: Mutex<Vec<(u64, Want, Vec<u8>)>>,
}

fn wants() -> Vec<Want> {
    let pixels =
        [Pixels::Rgba8, Pixels::Bgra8, Pixels::I420 { full_range: true }, Pixels::I420 { full_range: false }];
    let extent = |(width, height): (u32, u32)| vk::Extent2D { width, height };
    TARGETS.iter().flat_map(|&t| pixels.map(|pixels| Want { extent: extent(t), pixels })).collect()
}

impl Watchers for Keep {
    fn wanted(&self, _frame: u64) -> Vec<Want> {
        wants()
    }
    fn drawing(&self, _frame: u64, _want: Want) {}
    fn take(&self, frame: ReadFrame) {
        let want = Want { extent: frame.shot.extent, pixels: frame.shot.pixels };
        let bytes = (*frame.pixels).as_ref()[..frame.shot.bytes()].to_vec();
        self.got.lock().unwrap_or_else(|p| p.into_inner()).push((frame.frame, want, bytes));
    }
    fn exposure(&self) -> f32 {
        1.0
    }
    fn abandon(&self) {}
}

fn scene() -> Scene {
    Scene { kind: SceneKind::Julia, width: FRAME.0, height: FRAME.1, cost: 24 }
}

/// Frame `i` in `format`.
fn frame(format: Format, i: u32) -> Vec<u8> {
    let mut out = vec![0u8; (FRAME.0 * FRAME.1) as usize * format.bytes_per_pixel() as usize];
    render_cpu_as(&scene(), &FrameArgs::new(&scene(), i * 5), format, &mut out, 1);
    out
}

/// BT.601 of 8-bit RGB in integers, as shaders/draw.wgsl computes it: Y, and (U, V) of a sum of four.
fn yuv(c: [i32; 3], full: bool) -> i32 {
    match full {
        true => (77 * c[0] + 150 * c[1] + 29 * c[2] + 128) >> 8,
        false => ((66 * c[0] + 129 * c[1] + 25 * c[2] + 128) >> 8) + 16,
    }
}

fn chroma(sum: [i32; 3], full: bool) -> (i32, i32) {
    let c = sum.map(|v| (v + 2) / 4);
    let (u, v) = match full {
        true => (
            (-43 * c[0] - 85 * c[1] + 128 * c[2] + 128) >> 8,
            (128 * c[0] - 107 * c[1] - 21 * c[2] + 128) >> 8,
        ),
        false => (
            (-38 * c[0] - 74 * c[1] + 112 * c[2] + 128) >> 8,
            (112 * c[0] - 94 * c[1] - 18 * c[2] + 128) >> 8,
        ),
    };
    ((u + 128).clamp(0, 255), (v + 128).clamp(0, 255))
}

/// The largest difference of I420 `got` from the reference `want` (`None`
/// pixels, the letterbox's edges, not compared), and whether the padding
/// repeats the last column and row.
fn i420_difference(got: &[u8], want: &[Option<[f64; 3]>], (w, h): (u32, u32), full: bool) -> (i32, bool) {
    let (w, h) = (w as usize, h as usize);
    let l = I420::of(vk::Extent2D { width: w as u32, height: h as u32 });
    let at = |x: usize, y: usize| want[y.min(h - 1) * w + x.min(w - 1)].map(|c| c.map(|v| v.round() as i32));
    let mut worst = 0;
    for y in 0..h {
        for x in 0..w {
            if let Some(c) = at(x, y) {
                worst = worst.max((i32::from(got[y * l.y_stride + x]) - yuv(c, full)).abs());
            }
        }
    }
    for cy in 0..h.div_ceil(2) {
        for cx in 0..w.div_ceil(2) {
            let four = [(0, 0), (1, 0), (0, 1), (1, 1)].map(|(dx, dy)| at(2 * cx + dx, 2 * cy + dy));
            let Some(sum) =
                four.iter().try_fold([0; 3], |s, c| c.map(|c| [s[0] + c[0], s[1] + c[1], s[2] + c[2]]))
            else {
                continue;
            };
            let (u, v) = chroma(sum, full);
            let i = cy * l.c_stride + cx;
            worst = worst.max((i32::from(got[l.u + i]) - u).abs()).max((i32::from(got[l.v + i]) - v).abs());
        }
    }
    let row = |y: usize| &got[y * l.y_stride..(y + 1) * l.y_stride];
    let padded = (0..l.rows).all(|y| row(y)[w..].iter().all(|&b| b == row(y)[w - 1]))
        && (h..l.rows).all(|y| row(y) == row(h - 1));
    (worst, padded)
}

#[test]
fn watchers_get_the_reference_as_rgba8_and_as_i420_in_every_format() {
    let gpu = open();
    for format in
        [Format::Rgba8, Format::Rgba8Srgb, Format::Bgra8, Format::Rgba16f, Format::Rgba32f, Format::R32f]
    {
        let keep = Arc::new(Keep::default());
        let mailbox = Mailbox::new();
        let desc = FrameDesc::new(vk::Extent2D { width: FRAME.0, height: FRAME.1 })
            .format(format)
            .layout(Layout::Buffer);
        let output = Output { dir: None, workers: 1, watchers: Some(keep.clone()) };
        let fed = Fed { feed: Feed::Host(mailbox.clone()), progress: Arc::default() };
        let run =
            spawn(gpu.clone(), desc, fed, output, StartAt { first: 0, base: 0 }).expect("the run starts");
        for i in 0..FRAMES {
            let put = mailbox.put(frame(format, i), true, &|| false).expect("the run takes frames");
            assert!(matches!(put, Put::Done(None)), "frame {i} replaced another");
        }
        mailbox.close();
        run.join().expect("the consumer thread").expect("the run ends cleanly");
        let got = std::mem::take(&mut *keep.got.lock().unwrap_or_else(|p| p.into_inner()));
        // Twelve wants, eight drawn a frame, starting one further on each frame: each one drawn.
        assert_eq!(got.len(), FRAMES as usize * MAX_SIZES, "{format:?}: eight wants of every frame");
        assert!(wants().iter().all(|w| got.iter().any(|(_, g, _)| g == w)), "{format:?}: a want never drawn");
        for (n, want, bytes) in got {
            let target = (want.extent.width, want.extent.height);
            let size = vk::Extent2D { width: FRAME.0, height: FRAME.1 };
            let reference = drawn_reference(&frame(format, n as u32), format, size, want.extent);
            match want.pixels {
                Pixels::Rgba8 | Pixels::Bgra8 => {
                    let mut bytes = bytes;
                    if want.pixels == Pixels::Bgra8 {
                        bytes.chunks_exact_mut(4).for_each(|px| px.swap(0, 2));
                    }
                    let diff = Diff::drawn(&bytes, &reference);
                    assert!(diff.within_tolerance(), "{format:?} frame {n} {want:?}: {diff:?}");
                }
                Pixels::I420 { full_range } => {
                    let (worst, padded) = i420_difference(&bytes, &reference, target, full_range);
                    let tolerance = i32::from(Diff::DRAWN_LEVELS);
                    assert!(
                        worst <= tolerance,
                        "{format:?} frame {n} I420 at {target:?}: {worst} levels off"
                    );
                    assert!(
                        padded,
                        "{format:?} frame {n} I420 at {target:?}: the padding does not repeat the edge"
                    );
                }
                Pixels::Rendered => unreachable!("never wanted"),
            }
        }
        println!("  {format:?}: {FRAMES} frames at {TARGETS:?} as RGBA8, BGRA8 and I420 (full, limited) equal the reference");
    }
    let v = gpu.device.validation();
    assert_eq!((v.errors, v.warnings), (0, 0), "validation messages");
}
