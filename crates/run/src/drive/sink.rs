//! The PNG writer pool: worker threads behind a queue encode frames
//! (and, with `--verify`, compare them with the CPU reference). Each file is
//! written to a temporary name and renamed, so `--out` never holds a partial PNG.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use ash::vk::Extent2D;

use crate::diagnostics::inject::{Fault, Inject};
use crate::metrics::stats::{median, push_bounded};
use crate::output::frame_file::{decode_frame, encode_frame, extension, Decoded};
use crate::present::readback::{ReadFrame, ReadStats, Recipient};
use crate::scene::director::Director;
use crate::scene::{drawn_reference, render_cpu_as, Diff, FrameArgs, Scene};
use vkcuda::Format;

/// One frame to write.
pub struct FrameJob {
    /// Frame number (names the file).
    pub frame: u64,
    /// What a rendered frame shows: its scene (the viewer can switch scenes)
    /// and the animation tick it was rendered at, for the CPU reference;
    /// `None` for a frame a caller handed in.
    pub shows: Option<(Scene, u32)>,
    /// The pixels' size as read (a drawn frame's: its draw target's).
    pub extent: Extent2D,
    /// The frame's format.
    pub format: Format,
    /// The pixels, packed rows: a `Vec`, or a readback buffer lent as is
    /// (given back when the job is dropped). In `format`, or RGBA8 when drawn.
    pub pixels: Box<dyn AsRef<[u8]> + Send>,
    /// `None`: the frame as rendered; `Some(size)`: drawn by the viewer's draw
    /// pass into an RGBA8 target of that size (letterboxed, filtered).
    pub target: Option<Extent2D>,
}

impl FrameJob {
    /// The pixels.
    pub fn pixels(&self) -> &[u8] {
        (*self.pixels).as_ref()
    }

    /// The picture's size: the frame's, or the draw target's.
    pub fn size(&self) -> Extent2D {
        self.target.unwrap_or(self.extent)
    }

    /// The pixels' format: the frame's, or RGBA8 when drawn.
    pub fn pixel_format(&self) -> Format {
        match self.target {
            None => self.format,
            Some(_) => Format::Rgba8,
        }
    }
}

/// What each written frame is compared with.
#[derive(Clone, Debug, Default)]
pub enum Reference {
    /// Nothing.
    #[default]
    None,
    /// The CPU reference of the built-in scene (`--verify`; tolerance as
    /// [`Diff::within_tolerance`]).
    Cpu,
    /// The file of the same name in a folder (`--compare-to`): an earlier
    /// dump. Equal when no channel differs by more than `tolerance` levels.
    Golden {
        /// The folder.
        dir: PathBuf,
        /// Largest channel difference, in 8-bit levels, that counts as equal.
        tolerance: u8,
    },
}

/// The most differing frames a report lists one by one.
pub const LISTED: usize = 20;

/// What the pool did.
#[derive(Debug, Default, Clone)]
pub struct SinkReport {
    /// PNG files written.
    pub written: u64,
    /// Frames compared with the reference.
    pub verified: u64,
    /// Frames beyond the tolerance.
    pub mismatched: u64,
    /// The worst frame.
    pub worst: Option<FrameDiff>,
    /// The first [`LISTED`] differing frames (by frame number).
    pub differing: Vec<FrameDiff>,
    /// First error a worker hit, if any, led by the writer's name.
    pub error: Option<String>,
    /// Per frame, where the time went: the workers' stages and the consumer's hand-off.
    pub stages: Stages,
    /// Worker threads.
    pub workers: usize,
    /// The readback buffers' memory properties.
    pub readback_memory: String,
    /// Readback buffers made (frame slots plus those lent to workers).
    pub readback_buffers: usize,
}

/// A frame compared with its reference, and how far it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameDiff {
    /// The frame's number.
    pub frame: u64,
    /// How far it was from its reference.
    pub diff: Diff,
}

impl SinkReport {
    /// Counts a compared frame, keeping the worst.
    fn compared(&mut self, frame: u64, diff: Diff, equal: bool) {
        self.verified += 1;
        if !equal {
            self.mismatched += 1;
            self.list_differing(&[FrameDiff { frame, diff }]);
        }
        self.keep_worst(Some(FrameDiff { frame, diff }));
    }

    fn list_differing(&mut self, frames: &[FrameDiff]) {
        self.differing.extend_from_slice(frames);
        self.differing.sort_by_key(|f| f.frame);
        self.differing.truncate(LISTED);
    }

    fn keep_worst(&mut self, other: Option<FrameDiff>) {
        let worse =
            |o: &FrameDiff, w: &FrameDiff| (o.diff.max, o.diff.differing) > (w.diff.max, w.diff.differing);
        if let Some(o) = other {
            if self.worst.as_ref().is_none_or(|w| worse(&o, w)) {
                self.worst = Some(o);
            }
        }
    }

    /// Adds what the readback that fed this pool measured.
    pub fn with_readback(mut self, read: ReadStats) -> Self {
        self.stages.handoff.extend(read.handoff);
        self.stages.buffer_wait.extend(read.buffer_wait);
        self.readback_memory = format!("{:?}", read.memory);
        self.readback_buffers = read.buffers;
        self
    }

    /// Adds what another pool did (the viewer starts one per interop build).
    pub fn merge(&mut self, other: SinkReport) {
        self.written += other.written;
        self.verified += other.verified;
        self.mismatched += other.mismatched;
        self.keep_worst(other.worst);
        self.list_differing(&other.differing);
        self.error = self.error.take().or(other.error);
        self.workers = other.workers;
        self.stages.extend(other.stages);
        self.readback_buffers = self.readback_buffers.max(other.readback_buffers);
        if self.readback_memory.is_empty() {
            self.readback_memory = other.readback_memory;
        }
    }
}

/// Where a frame's time went, by stage: per frame (`Stages`, up to
/// [`STAGE_SAMPLES`](crate::metrics::stats::STAGE_SAMPLES) frames each), or their medians ([`StageMedians`]).
#[derive(Debug, Default, Clone, Copy)]
pub struct Stages<T = Vec<Duration>> {
    /// A PNG worker rendering the CPU reference and comparing (with `--verify`).
    pub verify: T,
    /// A PNG worker encoding, into memory.
    pub encode: T,
    /// A PNG worker writing the file: create, write, `fdatasync`, rename.
    pub write: T,
    /// The consumer thread's hand-off of a read-back frame to the workers:
    /// taking a free buffer, queueing it once filled (no host copy).
    pub handoff: T,
    /// The consumer thread's wait for a worker to give a buffer back (the
    /// back-pressure when the workers fall behind).
    pub buffer_wait: T,
}

/// The median time per frame of each stage.
pub type StageMedians = Stages<Option<Duration>>;

impl<T> Stages<T> {
    /// `f` of every stage.
    fn map<U>(&self, mut f: impl FnMut(&T) -> U) -> Stages<U> {
        Stages {
            verify: f(&self.verify),
            encode: f(&self.encode),
            write: f(&self.write),
            handoff: f(&self.handoff),
            buffer_wait: f(&self.buffer_wait),
        }
    }

    /// Every stage, in field order.
    fn each_mut(&mut self) -> [&mut T; 5] {
        [&mut self.verify, &mut self.encode, &mut self.write, &mut self.handoff, &mut self.buffer_wait]
    }

    /// Every stage, in field order.
    fn into_each(self) -> [T; 5] {
        [self.verify, self.encode, self.write, self.handoff, self.buffer_wait]
    }
}

impl Stages {
    /// Adds another's samples, stage by stage.
    pub fn extend(&mut self, other: Stages) {
        for (mine, theirs) in self.each_mut().into_iter().zip(other.into_each()) {
            mine.extend(theirs);
        }
    }

    /// The median of each stage.
    pub fn medians(&self) -> StageMedians {
        self.map(|list| median(list))
    }
}

/// The file name of frame `frame` whose pixels are in `format` (`.png`, or `.exr` for floats).
pub fn frame_file_name(frame: u64, format: Format) -> String {
    format!("frame_{frame:06}.{}", extension(format))
}

/// The writer pool.
pub struct PngSink {
    tx: Option<Sender<FrameJob>>,
    workers: Vec<JoinHandle<()>>,
    report: Arc<Mutex<SinkReport>>,
}

impl PngSink {
    /// `workers` threads writing into `dir` (which must exist), comparing each frame with `reference`.
    pub fn new(dir: &Path, workers: usize, reference: Reference, inject: Inject) -> Self {
        Self::counting(dir, workers, reference, inject, Arc::default())
    }

    /// [`PngSink::new`], counting each file written in `written` as it is
    /// (the report has the count only once the pool finishes).
    pub fn counting(
        dir: &Path,
        workers: usize,
        reference: Reference,
        inject: Inject,
        written: Arc<AtomicU64>,
    ) -> Self {
        let workers = workers.max(1);
        // Not bounded here: the jobs hold the readback pool's buffers, and the
        // pool is (see `Readback`), so the consumer waits there, once.
        let (tx, rx) = channel::<FrameJob>();
        let rx = Arc::new(Mutex::new(rx));
        let report = Arc::new(Mutex::new(SinkReport { workers, ..SinkReport::default() }));
        let handles = (0..workers)
            .map(|_| {
                let (rx, report, dir, inject, reference) =
                    (rx.clone(), report.clone(), dir.to_path_buf(), inject.clone(), reference.clone());
                let written = written.clone();
                std::thread::spawn(move || worker(&rx, &report, &written, &dir, &reference, &inject))
            })
            .collect();
        Self { tx: Some(tx), workers: handles, report }
    }

    /// Worker threads.
    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// The first error a worker hit, if any, led by the writer's name
    /// ("OpenEXR writer: writing …").
    pub fn error(&self) -> Option<String> {
        self.lock().error.clone()
    }

    /// Queues a frame (never blocks).
    pub fn send(&self, job: FrameJob) -> Result<()> {
        let tx = self.tx.as_ref().ok_or_else(|| anyhow!("the frame writer already finished"))?;
        queue(tx, &self.report, job)
    }

    /// What a readback hands frames to: each becomes a job for the workers,
    /// compared with what `director` says the frame showed; without one
    /// (frames a caller handed in) numbered from `first` and compared with
    /// nothing.
    pub fn recipient(&self, director: Option<Arc<Director>>) -> Result<Box<dyn Recipient>> {
        let tx = self.tx.clone().ok_or_else(|| anyhow!("the frame writer already finished"))?;
        let (report, workers) = (self.report.clone(), self.workers());
        Ok(Box::new(PngFrames { tx, report, workers, director }))
    }

    /// Writes what is queued, stops the workers and reports.
    pub fn finish(mut self) -> SinkReport {
        self.tx.take();
        for w in std::mem::take(&mut self.workers) {
            if w.join().is_err() {
                self.lock().error.get_or_insert_with(|| "a frame writer thread panicked".into());
            }
        }
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SinkReport> {
        self.report.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The pool's side of a readback ([`PngSink::recipient`]).
struct PngFrames {
    tx: Sender<FrameJob>,
    report: Arc<Mutex<SinkReport>>,
    workers: usize,
    director: Option<Arc<Director>>,
}

impl Recipient for PngFrames {
    fn holds(&self) -> usize {
        // Each worker holds one frame while one more waits queued for it.
        2 * self.workers
    }

    /// Queues the frame (never blocks).
    fn take(&mut self, read: ReadFrame) -> Result<()> {
        let ReadFrame { frame, shot, pixels, .. } = read;
        let shows = match &self.director {
            Some(d) => {
                let spec = d.spec(frame).ok_or_else(|| anyhow!("frame {frame} is no longer remembered"))?;
                Some((spec.scene, spec.tick))
            }
            None => None,
        };
        let extent = shot.extent;
        let target = shot.drawn().then_some(extent);
        // Files are named by the run's frame number (a shard's frames merge with the others').
        let frame = shot.first + frame;
        let job = FrameJob { frame, shows, extent, format: shot.format, pixels, target };
        queue(&self.tx, &self.report, job)
    }

    fn failed(&self) -> Option<String> {
        self.report.lock().unwrap_or_else(|p| p.into_inner()).error.clone()
    }
}

/// Queues `job` for the workers, unless one of them failed (`report` says).
fn queue(tx: &Sender<FrameJob>, report: &Mutex<SinkReport>, job: FrameJob) -> Result<()> {
    if let Some(e) = report.lock().unwrap_or_else(|p| p.into_inner()).error.clone() {
        return Err(anyhow!(e));
    }
    tx.send(job).map_err(|_| anyhow!("the frame writer threads have stopped"))
}

/// A writer thread: takes jobs from `rx` until it closes, writes each into
/// `dir` (counting it in `counted`), compared with `reference`, into `report`.
fn worker(
    rx: &Mutex<Receiver<FrameJob>>,
    report: &Mutex<SinkReport>,
    counted: &AtomicU64,
    dir: &Path,
    reference: &Reference,
    inject: &Inject,
) {
    // The reference frame, kept between frames: a fresh 8 MB (1080p) buffer
    // per frame costs its page faults every time.
    let mut want = Vec::new();
    loop {
        let job = match rx.lock().unwrap_or_else(|p| p.into_inner()).recv() {
            Ok(job) => job,
            Err(_) => return, // queue closed and empty
        };
        let started = Instant::now();
        let diff = match reference {
            Reference::None => None,
            Reference::Cpu => {
                let d = cpu_diff(&job, &mut want, inject);
                Some((d, d.within_tolerance()))
            }
            Reference::Golden { dir, tolerance } => {
                let d = golden_diff(&job, dir);
                Some((d, d.max <= *tolerance))
            }
        };
        let verified = started.elapsed();
        let injected = inject.png_write(job.frame);
        let name = frame_file_name(job.frame, job.pixel_format());
        let injected = injected.with_context(|| format!("writing {}", dir.join(name).display()));
        let timed = injected.and_then(|()| write_png(dir, &job));
        let (frame, writer) = (job.frame, crate::output::frame_file::writer_name(job.format));
        drop(job); // gives a lent readback buffer back before taking the lock
        let mut r = report.lock().unwrap_or_else(|p| p.into_inner());
        if diff.is_some() {
            push_bounded(&mut r.stages.verify, verified);
        }
        let written = timed.map(|took| {
            push_bounded(&mut r.stages.encode, took.encode);
            push_bounded(&mut r.stages.write, took.write);
        });
        match written {
            Ok(()) => {
                r.written += 1;
                counted.fetch_add(1, Ordering::Release);
            }
            Err(e) => {
                // Named here, so every path that reports it says which writer failed.
                r.error.get_or_insert_with(|| format!("{writer}: {e:#}"));
            }
        }
        if let Some((d, equal)) = diff {
            r.compared(frame, d, equal);
        }
    }
}

/// `job` against the CPU reference of its scene (`want`: a buffer kept
/// between frames); a frame that shows no scene (handed in) differs in
/// every pixel: it has no reference.
fn cpu_diff(job: &FrameJob, want: &mut Vec<u8>, inject: &Inject) -> Diff {
    let Some((scene, tick)) = job.shows else { return Diff::everywhere(job.size()) };
    let (s, mismatch) = (&scene, inject.at(Fault::Mismatch, job.frame));
    let args = FrameArgs::new(s, tick);
    if job.target.is_none() && !mismatch {
        return Diff::against_scene(s, &args, job.format, job.pixels());
    }
    want.resize(s.width as usize * s.height as usize * job.format.bytes_per_pixel() as usize, 0);
    render_cpu_as(s, &args, job.format, want, 1);
    if mismatch {
        want.iter_mut().for_each(|b| *b = !*b);
    }
    match job.target {
        None => Diff::between_as(job.format, job.pixels(), want),
        Some(t) => Diff::drawn(
            job.pixels(),
            &drawn_reference(want, job.format, Extent2D { width: s.width, height: s.height }, t),
        ),
    }
}

/// `job` against the file of its name in `dir`; a missing, undecodable or
/// differently sized file differs in every pixel by 255.
fn golden_diff(job: &FrameJob, dir: &Path) -> Diff {
    let format = job.pixel_format();
    let all = Diff::everywhere(job.size());
    let golden = std::fs::read(dir.join(frame_file_name(job.frame, format)))
        .map_err(anyhow::Error::from)
        .and_then(|bytes| decode_frame(&bytes, format));
    match golden {
        Ok(Decoded { size, pixels }) if size == job.size() => Diff::between_as(format, job.pixels(), &pixels),
        _ => all,
    }
}

/// How long a frame's file took ([`write_png`]).
#[derive(Clone, Copy, Debug)]
pub struct WriteTimes {
    /// Encoding it in memory.
    pub encode: Duration,
    /// Writing, syncing and renaming the file.
    pub write: Duration,
}

/// Encodes `job` as PNG into `dir` atomically (a temporary file, then a
/// rename); returns how long encoding and writing took.
pub fn write_png(dir: &Path, job: &FrameJob) -> Result<WriteTimes> {
    let name = frame_file_name(job.frame, job.pixel_format());
    let final_path = dir.join(&name);
    let tmp: PathBuf = dir.join(format!(".{name}.tmp"));
    let started = Instant::now();
    let encoded = encode_frame(job.pixels(), job.size(), job.pixel_format());
    let encode = started.elapsed();
    let result = encoded.and_then(|png_bytes| {
        let mut file = File::create(&tmp)?;
        file.write_all(&png_bytes)?;
        file.sync_data()?;
        std::fs::rename(&tmp, &final_path)?;
        Ok(())
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.with_context(|| format!("writing {}", final_path.display()))?;
    Ok(WriteTimes { encode, write: started.elapsed() - encode })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::{render_cpu, SceneKind};

    /// Frame `frame` of `scene` at its own tick, as rendered (not drawn).
    fn job(frame: u64, scene: Scene, format: Format, pixels: Vec<u8>) -> FrameJob {
        let extent = Extent2D { width: scene.width, height: scene.height };
        FrameJob {
            frame,
            shows: Some((scene, frame as u32)),
            extent,
            format,
            pixels: Box::new(pixels),
            target: None,
        }
    }

    #[test]
    fn pool_writes_decodable_pngs_and_verifies() {
        let dir = std::env::temp_dir().join(format!("vkcuda-sink-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let scene = Scene { kind: SceneKind::Gradient, width: 40, height: 30, cost: 1 };
        let sink = PngSink::new(&dir, 2, Reference::Cpu, Inject::default());
        for frame in 0..5u64 {
            let mut pixels = vec![0u8; 40 * 30 * 4];
            render_cpu(&scene, &FrameArgs::new(&scene, frame as u32), &mut pixels, 1);
            if frame == 3 {
                pixels[10] ^= 0x40; // one wrong pixel, far off
            }
            sink.send(job(frame, scene, Format::Rgba8, pixels)).unwrap();
        }
        let r = sink.finish();
        assert_eq!((r.written, r.verified, r.mismatched), (5, 5, 1));
        let counts = (r.stages.verify.len(), r.stages.encode.len(), r.stages.write.len());
        assert_eq!(counts, (5, 5, 5), "a time per stage and frame");
        assert!(r.stages.medians().encode.is_some_and(|d| d > Duration::ZERO));
        assert_eq!(r.worst.map(|w| (w.frame, w.diff.max)), Some((3, 0x40)));
        let mut names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        assert_eq!(names.len(), 5, "{names:?}");
        let data = std::fs::read(dir.join("frame_000004.png")).unwrap();
        let size = decode_frame(&data, Format::Rgba8).unwrap().size;
        assert_eq!((size.width, size.height), (40, 30));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The error is named by its writer wherever it is read: `error()` (the
    /// readback pool reads it while waiting for a buffer), `send` and the report.
    #[test]
    fn a_write_error_names_its_writer_on_every_path() {
        let scene = Scene { kind: SceneKind::Gradient, width: 8, height: 4, cost: 1 };
        for (format, writer, file) in [
            (Format::Rgba8, "PNG writer: writing", "frame_000001.png"),
            (Format::Rgba16f, "OpenEXR writer: writing", "frame_000001.exr"),
        ] {
            let dir = std::env::temp_dir().join(format!("vkcuda-sink-error-{format}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let sink = PngSink::new(&dir, 1, Reference::None, Inject(vec!["png-write@1".parse().unwrap()]));
            let blank =
                |frame| job(frame, scene, format, vec![0u8; 8 * 4 * format.bytes_per_pixel() as usize]);
            sink.send(blank(1)).unwrap();
            let deadline = Instant::now() + Duration::from_secs(30);
            let said = loop {
                match sink.error() {
                    Some(e) => break e,
                    None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
                    None => panic!("no error from the injected full disk within 30 s"),
                }
            };
            assert!(said.starts_with(writer) && said.contains(file) && said.contains("No space"), "{said}");
            assert_eq!(sink.send(blank(2)).unwrap_err().to_string(), said);
            assert_eq!(sink.finish().error.as_deref(), Some(said.as_str()));
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }

    #[test]
    fn every_format_is_written_losslessly_and_verified() {
        let scene = Scene { kind: SceneKind::Julia, width: 71, height: 45, cost: 40 };
        for format in Format::ALL {
            let dir = std::env::temp_dir().join(format!("vkcuda-sink-{format}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let sink = PngSink::new(&dir, 2, Reference::Cpu, Inject::default());
            let bytes = 71 * 45 * format.bytes_per_pixel() as usize;
            let mut frames = Vec::new();
            for frame in 0..3u64 {
                let mut pixels = vec![0u8; bytes];
                render_cpu_as(&scene, &FrameArgs::new(&scene, frame as u32), format, &mut pixels, 1);
                frames.push(pixels.clone());
                if frame == 2 {
                    // The lowest byte of one pixel's first channel: a float off by an ulp, or
                    // an 8-bit channel off by one level, in one pixel of 3195: within tolerance.
                    pixels[0] ^= 1;
                }
                sink.send(job(frame, scene, format, pixels)).unwrap();
            }
            let r = sink.finish();
            assert_eq!((r.written, r.verified, r.mismatched), (3, 3, 0), "{format}: {:?}", r.worst);
            assert_eq!(r.worst.map(|w| (w.frame, w.diff.differing, w.diff.max)), Some((2, 1, 1)), "{format}");
            let file = dir.join(frame_file_name(1, format));
            let data = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let decoded = decode_frame(&data, format).unwrap();
            if !format.is_float() {
                let reader = png::Decoder::new(std::io::Cursor::new(&data)).read_info().unwrap();
                assert_eq!(reader.info().srgb.is_some(), format == Format::Rgba8Srgb, "{format}");
            }
            let want = Decoded { size: Extent2D { width: 71, height: 45 }, pixels: frames[1].clone() };
            assert_eq!(decoded, want, "{format}: the file holds other values");
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }

    #[test]
    fn drawn_frames_are_verified_against_the_letterboxed_reference() {
        let dir = std::env::temp_dir().join(format!("vkcuda-sink-drawn-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let scene = Scene { kind: SceneKind::Gradient, width: 40, height: 30, cost: 1 };
        let target = Extent2D { width: 64, height: 64 };
        let sink = PngSink::new(&dir, 2, Reference::Cpu, Inject::default());
        for frame in 0..3u64 {
            let mut frame_px = vec![0u8; 40 * 30 * 4];
            render_cpu(&scene, &FrameArgs::new(&scene, frame as u32), &mut frame_px, 1);
            let want = drawn_reference(&frame_px, Format::Rgba8, Extent2D { width: 40, height: 30 }, target);
            // What a GPU draws: the reference rounded, 2 levels off, anything at the edges.
            let mut pixels: Vec<u8> = want
                .iter()
                .flat_map(|p| {
                    let [r, g, b] = p.unwrap_or([7.0; 3]).map(|c| (c.round() as u8).saturating_add(2));
                    [r, g, b, 255]
                })
                .collect();
            if frame == 1 {
                // A band of 64 × 2 pixels 40 levels off: more than 0.1% of the picture.
                pixels[32 * 64 * 4..34 * 64 * 4].iter_mut().step_by(4).for_each(|r| *r = r.wrapping_add(40));
            }
            sink.send(FrameJob {
                frame,
                shows: Some((scene, frame as u32)),
                extent: target,
                format: Format::Rgba8,
                pixels: Box::new(pixels),
                target: Some(target),
            })
            .unwrap();
        }
        let r = sink.finish();
        assert_eq!((r.written, r.verified, r.mismatched), (3, 3, 1), "{:?}", r.worst);
        assert_eq!(r.worst.map(|w| (w.frame, w.diff.drawn)), Some((1, true)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn merged_reports_keep_each_stage_apart() {
        let ms = |v: &[u64]| v.iter().map(|&m| Duration::from_millis(m)).collect::<Vec<_>>();
        // Stage i of report r holds r·10 + i ms, so a swapped or lost stage shows.
        let report = |r: u64| SinkReport {
            stages: Stages {
                verify: ms(&[r * 10]),
                encode: ms(&[r * 10 + 1]),
                write: ms(&[r * 10 + 2]),
                handoff: ms(&[r * 10 + 3]),
                buffer_wait: ms(&[r * 10 + 4]),
            },
            ..SinkReport::default()
        };
        let mut merged = report(1);
        merged.merge(report(2));
        let s = &merged.stages;
        let all = [&s.verify, &s.encode, &s.write, &s.handoff, &s.buffer_wait];
        for (i, list) in all.into_iter().enumerate() {
            assert_eq!(*list, ms(&[10 + i as u64, 20 + i as u64]), "stage {i}");
        }
        let m = merged.stages.medians();
        let medians = [m.verify, m.encode, m.write, m.handoff, m.buffer_wait];
        // The mean of the middle two: 15 ms + i.
        let want: Vec<_> = (0..5).map(|i| Some(Duration::from_micros(15_000 + 1_000 * i))).collect();
        assert_eq!(medians.to_vec(), want);
    }

    #[test]
    fn a_frame_without_a_scene_is_written_and_has_no_cpu_reference() {
        let dir = std::env::temp_dir().join(format!("vkcuda-sink-fed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sink = PngSink::new(&dir, 1, Reference::Cpu, Inject::default());
        let pixels: Vec<u8> = (0..5 * 3 * 4).map(|i| i as u8).collect();
        let job = |frame| FrameJob {
            frame,
            shows: None,
            extent: Extent2D { width: 5, height: 3 },
            format: Format::Rgba8,
            pixels: Box::new(pixels.clone()),
            target: None,
        };
        sink.send(job(7)).unwrap();
        let r = sink.finish();
        assert_eq!(
            (r.written, r.verified, r.mismatched),
            (1, 1, 1),
            "nothing to compare with: every pixel differs"
        );
        let bytes = std::fs::read(dir.join(frame_file_name(7, Format::Rgba8))).unwrap();
        let want = Decoded { size: Extent2D { width: 5, height: 3 }, pixels };
        assert_eq!(decode_frame(&bytes, Format::Rgba8).unwrap(), want);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_write_leaves_no_file() {
        let dir = std::env::temp_dir().join(format!("vkcuda-sink-missing-{}", std::process::id()));
        let format = Format::Rgba8;
        let pixels = Box::new(vec![0u8; 64]);
        let extent = Extent2D { width: 4, height: 4 };
        let job = FrameJob { frame: 0, shows: None, extent, format, pixels, target: None };
        assert!(write_png(&dir, &job).is_err());
        assert!(!dir.exists());
    }
}
