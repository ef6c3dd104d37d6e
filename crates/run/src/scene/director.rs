//! What each frame shows. The viewer's controls (pause, scene, cost) change
//! the director's state; the producer asks it, once per frame, what frame `g`
//! is, and the consumer later asks what frame `g` was (to save or verify it).

use std::sync::{Mutex, MutexGuard};

use crate::scene::{Scene, SceneKind, MAX_COST};

/// Everything the pixels of one frame depend on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FrameSpec {
    /// Scene, size and cost.
    pub scene: Scene,
    /// Animation tick (advances every frame unless paused).
    pub tick: u32,
    /// The viewer's pointer over the frame (a user kernel sees it).
    pub pointer: Pointer,
}

/// The pointer over the frame, in frame pixels, and the buttons held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Pointer {
    /// Column and row of the frame pixel under the pointer; `None` when the
    /// pointer is not over the frame (and always headless).
    pub at: Option<(u32, u32)>,
    /// Buttons held: bit 0 left, bit 1 right, bit 2 middle.
    pub buttons: u32,
}

impl Pointer {
    /// No pointer, no button.
    pub const NONE: Self = Self { at: None, buttons: 0 };
}

/// Frames are remembered this long after the producer began them; the
/// consumer is never more than a few frames behind.
const HISTORY: usize = 256;

struct State {
    scene: Scene,
    paused: bool,
    next_tick: u32,
    pointer: Pointer,
    history: Vec<Option<(u64, FrameSpec)>>,
}

/// The shared frame state.
pub struct Director {
    state: Mutex<State>,
    /// The global number of local frame 0 (`--shard`); fixed for the run.
    first: u64,
}

impl Director {
    /// Starts at tick 0, not paused.
    pub fn new(scene: Scene) -> Self {
        Self::starting_at(scene, 0)
    }

    /// Starts at frame (and tick) `first`: local frame `g` is global frame
    /// `first + g` (a shard of a longer run: `--shard`).
    pub fn starting_at(scene: Scene, first: u64) -> Self {
        let state = State {
            scene,
            paused: false,
            next_tick: first as u32,
            pointer: Pointer::NONE,
            history: vec![None; HISTORY],
        };
        Self { state: Mutex::new(state), first }
    }

    /// The global number of local frame 0.
    pub fn first(&self) -> u64 {
        self.first
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Producer: what frame `g` shows. Advances the animation unless paused.
    pub fn begin(&self, g: u64) -> FrameSpec {
        let mut s = self.lock();
        let spec = FrameSpec { scene: s.scene, tick: s.next_tick, pointer: s.pointer };
        if !s.paused {
            s.next_tick = s.next_tick.wrapping_add(1);
        }
        s.history[(g % HISTORY as u64) as usize] = Some((g, spec));
        spec
    }

    /// Consumer: what frame `g` showed, if it is still remembered.
    pub fn spec(&self, g: u64) -> Option<FrameSpec> {
        match self.lock().history[(g % HISTORY as u64) as usize] {
            Some((frame, spec)) if frame == g => Some(spec),
            _ => None,
        }
    }

    /// The state the next frame will be made from.
    pub fn current(&self) -> FrameSpec {
        let s = self.lock();
        FrameSpec { scene: s.scene, tick: s.next_tick, pointer: s.pointer }
    }

    /// Where the pointer is over the frame, and which buttons are held (the viewer).
    pub fn set_pointer(&self, pointer: Pointer) {
        self.lock().pointer = pointer;
    }

    /// Whether the animation is paused.
    pub fn paused(&self) -> bool {
        self.lock().paused
    }

    /// Pauses or resumes the animation.
    pub fn toggle_pause(&self) {
        let mut s = self.lock();
        s.paused = !s.paused;
    }

    /// Switches to the next (`step` = 1) or previous (`step` = -1) scene.
    pub fn switch_scene(&self, step: isize) {
        let mut s = self.lock();
        let all = SceneKind::ALL;
        let i = all.iter().position(|k| *k == s.scene.kind).unwrap_or(0) as isize;
        s.scene.kind = all[(i + step).rem_euclid(all.len() as isize) as usize];
    }

    /// Doubles (`up`) or halves the scene's cost, within 1..=[`MAX_COST`].
    pub fn change_cost(&self, up: bool) {
        let mut s = self.lock();
        s.scene.cost =
            if up { s.scene.cost.saturating_mul(2).min(MAX_COST) } else { (s.scene.cost / 2).max(1) };
    }

    /// Acts on a key the viewer's way, named as a browser names it
    /// (`KeyboardEvent.key`): Space pauses, the arrows switch scenes, `+`/`=`
    /// and `-` change the cost. Returns whether the key was one of these.
    pub fn act(&self, key: &str) -> bool {
        match key {
            " " => self.toggle_pause(),
            "ArrowRight" => self.switch_scene(1),
            "ArrowLeft" => self.switch_scene(-1),
            "+" | "=" => self.change_cost(true),
            "-" => self.change_cost(false),
            _ => return false,
        }
        true
    }

    /// Changes the frame size (the interop is rebuilt around it).
    pub fn resize(&self, width: u32, height: u32) {
        let mut s = self.lock();
        s.scene.width = width;
        s.scene.height = height;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn director() -> Director {
        Director::new(Scene { kind: SceneKind::Gradient, width: 8, height: 8, cost: 4 })
    }

    #[test]
    fn ticks_follow_frames_until_paused() {
        let d = director();
        assert_eq!((d.begin(0).tick, d.begin(1).tick), (0, 1));
        d.toggle_pause();
        assert_eq!((d.begin(2).tick, d.begin(3).tick), (2, 2));
        d.toggle_pause();
        assert_eq!(d.begin(4).tick, 2);
        assert_eq!(d.begin(5).tick, 3);
        assert_eq!(d.spec(3).map(|s| s.tick), Some(2));
        assert_eq!(d.spec(5 + HISTORY as u64), None);
    }

    #[test]
    fn controls_change_what_comes_next() {
        let d = director();
        d.switch_scene(1);
        assert_eq!(d.begin(0).scene.kind, SceneKind::Julia);
        d.switch_scene(1);
        assert_eq!(d.current().scene.kind, SceneKind::Gradient);
        d.switch_scene(-1);
        assert_eq!(d.current().scene.kind, SceneKind::Julia);
        d.change_cost(true);
        assert_eq!(d.current().scene.cost, 8);
        for _ in 0..10 {
            d.change_cost(false);
        }
        assert_eq!(d.current().scene.cost, 1);
        assert_eq!(d.spec(0).map(|s| s.scene.cost), Some(4), "history keeps what frame 0 was");
    }

    #[test]
    fn keys_act_as_the_viewer_has_them() {
        let d = director();
        assert!(d.act(" ") && d.paused());
        assert!(d.act("ArrowRight"));
        assert_eq!(d.current().scene.kind, SceneKind::Julia);
        assert!(d.act("ArrowLeft") && d.act("+"));
        assert_eq!((d.current().scene.kind, d.current().scene.cost), (SceneKind::Gradient, 8));
        assert!(d.act("-") && d.act("="));
        assert_eq!(d.current().scene.cost, 8);
        assert!(!d.act("x") && !d.act("Space") && !d.act(""));
    }
}
