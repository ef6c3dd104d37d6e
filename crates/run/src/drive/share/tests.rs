//! The door with real sockets in a scratch folder: names held and freed,
//! peers of another uid, silent, malformed or on another GPU refused alone.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::*;
use crate::drive::child::channel::{Channel, Received};

/// Long enough for anything on a loaded machine; a state is waited for, never this time.
const PATIENCE: Duration = Duration::from_secs(20);

const GPU: GpuIdentity = GpuIdentity { device: [0xA1; 16], driver: [0xD1; 16] };

/// A folder of a test's own (others may enter it: the share folder inside is
/// what is closed), removed at its end.
pub(super) struct Scratch(PathBuf);

impl Scratch {
    pub(super) fn new(what: &str) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("vkcuda-share-{what}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir(&path).expect("a scratch folder");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("its mode");
        Scratch(path)
    }

    pub(super) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Fails unless this runs as root (a test of another uid needs it): not root
/// is a failure that says so, never a silent pass. CI and the dev machine are
/// root; elsewhere skip it by name (cargo test's skip option).
pub(super) fn require_root(what: &str) {
    assert!(
        rustix::process::geteuid().is_root(),
        "{what} needs root (to run a process as uid 65534): run the tests as root, or skip this one by name"
    );
}

fn name(name: &str) -> ShareName {
    ShareName::new(name).expect("a name")
}

/// What the door did with the next knock, refused: why.
fn refused(door: &Door) -> Refusal {
    match door.accept(PATIENCE).expect("the door") {
        Knock::Refused(refusal) => refusal,
        Knock::Admitted(visitor) => panic!("pid {} was let in", visitor.pid),
        Knock::Nobody => panic!("nobody knocked within {PATIENCE:?}"),
    }
}

/// A viewer on `gpu` entering `name` on a thread of its own.
fn viewer(
    dir: &ShareDir,
    name: &ShareName,
    gpu: GpuIdentity,
) -> std::thread::JoinHandle<anyhow::Result<Channel>> {
    let (dir, name) = (dir.clone(), name.clone());
    std::thread::spawn(move || enter(&dir, &name, &gpu, PATIENCE))
}

#[test]
fn a_live_name_is_refused_with_its_pid_and_a_dropped_door_frees_it() {
    let scratch = Scratch::new("live");
    let dir = ShareDir::at(scratch.path()).expect("a share folder");
    let door = Door::open(&dir, &name("train"), GPU).expect("a door");
    let taken = format!("{:#}", Door::open(&dir, &name("train"), GPU).err().expect("a name in use"));
    assert!(taken.contains(&format!("in use by pid {}", std::process::id())), "{taken}");
    // The probe knocked and left: the door says so and goes on.
    assert!(matches!(refused(&door).why, Why::Left));
    let path = door.path().to_path_buf();
    drop(door);
    assert!(!path.exists(), "the dropped door's socket stays");
    Door::open(&dir, &name("train"), GPU).expect("the name free again");
}

#[test]
fn a_dead_jobs_socket_is_replaced_and_list_shows_live_names_only() {
    let scratch = Scratch::new("stale");
    let dir = ShareDir::at(scratch.path()).expect("a share folder");
    // A job that died: its socket's file stays, nobody listens.
    drop(std::os::unix::net::UnixListener::bind(dir.socket(&name("old"))).expect("a socket"));
    drop(std::os::unix::net::UnixListener::bind(dir.socket(&name("gone"))).expect("a socket"));
    std::fs::write(dir.path().join("notes.txt"), b"not a socket").expect("a file");
    let live = Door::open(&dir, &name("live"), GPU).expect("a door");
    let old = Door::open(&dir, &name("old"), GPU).expect("the dead job's name");
    let listed = list(&dir).expect("the live names");
    let pid = Some(std::process::id());
    assert_eq!(listed, vec![Listed { name: name("live"), pid }, Listed { name: name("old"), pid }]);
    // The stale one is skipped, not removed: a later door replaces it.
    assert!(dir.socket(&name("gone")).exists());
    // Each listing knocked on both doors, and left.
    for door in [&live, &old] {
        assert!(matches!(refused(door).why, Why::Left));
    }
    // A viewer of a dead job's name, and of a name nobody holds, is told which.
    let gone = format!("{:#}", enter(&dir, &name("gone"), &GPU, PATIENCE).err().expect("a dead job"));
    assert!(gone.contains("`gone`'s job is gone"), "{gone}");
    let none = format!("{:#}", enter(&dir, &name("none"), &GPU, PATIENCE).err().expect("no job"));
    assert!(none.contains("no job shares `none`") && none.contains("are `live`, `old`"), "{none}");
}

#[test]
fn a_viewer_on_the_jobs_gpu_is_let_in_and_another_gpu_or_driver_refused_on_both_ends() {
    let scratch = Scratch::new("gpu");
    let dir = ShareDir::at(scratch.path()).expect("a share folder");
    let share = name("sim");
    let door = Door::open(&dir, &share, GPU).expect("a door");
    let entering = viewer(&dir, &share, GPU);
    let Knock::Admitted(visitor) = door.accept(PATIENCE).expect("the door") else { panic!("not let in") };
    let channel = entering.join().expect("the viewer").expect("let in");
    visitor.channel.send(&42u32).expect("a message through the door");
    assert!(matches!(channel.recv::<u32>(), Ok(Received::Message(42))));
    for (theirs, says) in [
        (GpuIdentity { device: [0xB2; 16], ..GPU }, "another GPU"),
        (GpuIdentity { driver: [0xD2; 16], ..GPU }, "another driver on the same GPU"),
    ] {
        let entering = viewer(&dir, &share, theirs);
        let refusal = refused(&door);
        assert!(matches!(&refusal.why, Why::Gpu(_)), "{refusal}");
        assert!(refusal.to_string().contains(says), "the job's words: {refusal}");
        let theirs = format!("{:#}", entering.join().expect("the viewer").err().expect("refused"));
        assert!(
            theirs.contains(says) && theirs.contains("cannot be attached here"),
            "the viewer's: {theirs}"
        );
    }
}

#[test]
fn a_silent_peer_is_closed_after_the_handshakes_bound() {
    let scratch = Scratch::new("silent");
    let dir = ShareDir::at(scratch.path()).expect("a share folder");
    let bound = Duration::from_millis(200);
    let door = Door::open(&dir, &name("quiet"), GPU).expect("a door").handshake_within(bound);
    let mut peer = UnixStream::connect(door.path()).expect("a connection");
    let refusal = refused(&door);
    assert!(matches!(refusal.why, Why::Silent(within) if within == bound), "{refusal}");
    // The peer finds its end closed, having been told nothing.
    peer.set_read_timeout(Some(PATIENCE)).expect("a timeout");
    let mut got = Vec::new();
    peer.read_to_end(&mut got).expect("the end");
    assert!(got.is_empty(), "the silent peer was sent {} bytes", got.len());
}

#[test]
fn a_malformed_handshake_closes_that_peer_and_the_door_lets_in_the_next() {
    let scratch = Scratch::new("malformed");
    let dir = ShareDir::at(scratch.path()).expect("a share folder");
    let share = name("bad");
    let door = Door::open(&dir, &share, GPU).expect("a door");
    let path = door.path().to_path_buf();
    let peer = std::thread::spawn(move || -> anyhow::Result<bool> {
        let mut raw = UnixStream::connect(&path)?;
        let channel = Channel::inherited(raw.try_clone()?.into());
        channel.hello(PATIENCE)?;
        // A message frame whose JSON is broken.
        let junk = b"{\"device\": [1, 2,";
        raw.write_all(b"M")?;
        raw.write_all(&(junk.len() as u32).to_le_bytes())?;
        raw.write_all(junk)?;
        channel.read_timeout(Some(PATIENCE))?;
        // The door's identity came before it read ours; then its end.
        let said = matches!(channel.recv::<GpuIdentity>()?, Received::Message(gpu) if gpu == GPU);
        Ok(said && matches!(channel.recv::<GpuIdentity>()?, Received::Closed))
    });
    let refusal = refused(&door);
    assert!(matches!(&refusal.why, Why::Malformed(why) if why.contains("malformed")), "{refusal}");
    assert!(peer.join().expect("the peer").expect("its socket"), "the malformed peer was not closed");
    let entering = viewer(&dir, &share, GPU);
    assert!(matches!(door.accept(PATIENCE).expect("the door"), Knock::Admitted(_)));
    entering.join().expect("the viewer").expect("the next one let in");
}

#[test]
fn a_peer_of_another_uid_is_refused_and_the_next_let_in() {
    require_root("a peer of another uid");
    let scratch = Scratch::new("uid");
    let dir = ShareDir::at(scratch.path()).expect("a share folder");
    let share = name("mine");
    let door = Door::open(&dir, &share, GPU).expect("a door");
    // The folder's mode keeps other users out; opened here, so the door's own check is what refuses.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).expect("chmod");
    std::fs::set_permissions(door.path(), std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let script = "import socket, sys\n\
                  s = socket.socket(socket.AF_UNIX)\n\
                  s.settimeout(20)\n\
                  s.connect(sys.argv[1])\n\
                  print(len(s.recv(64)))\n";
    let nobody = std::process::Command::new("/usr/bin/python3")
        .args(["-c", script])
        .arg(door.path())
        .uid(65534)
        .gid(65534)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 as uid 65534");
    let refusal = refused(&door);
    assert!(matches!(refusal.why, Why::OtherUser { uid: 65534 }), "{refusal}");
    assert_eq!(refusal.pid, nobody.id());
    let out = nobody.wait_with_output().expect("the peer's end");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0", "the other user was sent something");
    let entering = viewer(&dir, &share, GPU);
    assert!(matches!(door.accept(PATIENCE).expect("the door"), Knock::Admitted(_)));
    entering.join().expect("the viewer").expect("this user let in");
}
