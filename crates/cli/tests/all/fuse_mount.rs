//! `nandkit mount` through the kernel: ordinary tools and programs on a FUSE mount, then
//! unmount, fsck, remount and check. Needs /dev/fuse and fusermount3 (Debian's fuse3);
//! without them every test here says SKIPPED and passes (under `CI=true` it fails).
//!
//! Nothing waits a fixed time for a mount: `nandkit mount` returns once the mount is up,
//! and the tests still poll /proc/mounts (bounded) before using it.
//!
//! NANDKIT_LONG=1 makes the fsx-style exerciser run 100x longer; NANDKIT_FSX_SEED=N
//! replays a seed.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::common::fuse::*;
use crate::common::nandkit;

const GIT: &str = "git -c user.name=nandkit -c user.email=nandkit@example.com \
                   -c init.defaultBranch=main -c core.fsync=all";

#[test]
fn scripted_session_survives_unmount_fsck_and_remount() {
    if !fuse_ready("scripted_session_survives_unmount_fsck_and_remount") {
        return;
    }
    let rig = Rig::new(&["--geometry", "mlc-1g", "--device-size", "64MiB"]);
    let src = source_tree();
    let scratch = rig.dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let env = [("SRC", src.as_path()), ("SCRATCH", scratch.as_path())];
    let m = rig.mount(&[]);

    // The mount as df and the mount table see it.
    let o = Command::new("df").arg("-T").arg(&rig.mnt).output().unwrap();
    assert!(
        text(&o.stdout).contains("fuse.nandkit"),
        "{}",
        text(&o.stdout)
    );

    // A busy mount point, and an image in use, are refused.
    let other = Rig::new(&["--geometry", "tiny"]);
    let o = nandkit(&["mount", s(&other.img), s(&rig.mnt)]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("is busy"), "{}", text(&o.stderr));
    let o = nandkit(&["fsck", s(&rig.img)]);
    assert_eq!(o.status.code(), Some(8));
    assert!(
        text(&o.stderr).contains("is mounted on"),
        "{}",
        text(&o.stderr)
    );
    let o = nandkit(&["mkfs", s(&rig.img), "--force"]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("is mounted on"),
        "{}",
        text(&o.stderr)
    );

    sh(
        &rig.mnt,
        &env,
        r#"
        mkdir -p a/b/c
        cp -r "$SRC" tree
        diff -r "$SRC" tree
        tar -cf "$SCRATCH/t.tar" tree
        mkdir x && tar -xf "$SCRATCH/t.tar" -C x && diff -r "$SRC" x/tree
        mkdir y && tar -cf - -C "$SRC" . | tar -xf - -C y && diff -r "$SRC" y
        echo hello > a/f
        ln a/f a/hard
        ln -s f a/soft
        test "$(readlink a/soft)" = f
        test "$(cat a/soft)" = hello
        test "$(stat -c %h a/f)" = 2
        echo other > a/g
        mv a/g a/f
        test "$(cat a/f)" = other
        test "$(cat a/hard)" = hello
        test "$(stat -c %h a/hard)" = 1
        test ! -e a/g
        mv a/b a/b2
        test -d a/b2/c && test ! -e a/b
        mv a/b2/c a/c2 && test -d a/c2
        rm a/hard && test ! -e a/hard
        rm -r x
        test ! -e x
        truncate -s 1M a/big && test "$(stat -c %s a/big)" = 1048576
        truncate -s 10 a/big && test "$(stat -c %s a/big)" = 10
        dd if=/dev/urandom of=a/rand bs=64k count=16 status=none
        cp a/rand "$SCRATCH/rand"
        cmp a/rand "$SCRATCH/rand"
        printf x | dd of=a/sparse bs=1 seek=5000000 conv=notrunc status=none
        test "$(stat -c %s a/sparse)" = 5000001
        test "$(head -c 5000000 a/sparse | tr -d '\0' | wc -c)" = 0
        printf 'line1\n' > a/log && printf 'line2\n' >> a/log
        test "$(cat a/log | wc -l)" = 2
        chmod 640 a/f && test "$(stat -c %a a/f)" = 640
        chmod 2755 a/c2 && test "$(stat -c %a a/c2)" = 2755
        touch -m -d '2001-02-03 04:05:06 UTC' a/f
        test "$(stat -c %Y a/f)" = 981173106
        mkfifo a/fifo && test -p a/fifo
        mknod a/null c 1 3 && test -c a/null
        test "$(stat -c %t,%T a/null)" = 1,3
        mkdir many
        i=0; while [ $i -lt 300 ]; do echo $i > many/f$i; i=$((i+1)); done
        test "$(ls many | wc -l)" = 300
        i=0; while [ $i -lt 300 ]; do rm many/f$i; i=$((i+3)); done
        test "$(ls many | wc -l)" = 200
        test "$(find . -xdev | wc -l)" -gt 250
        "#,
    );
    if unsafe_is_root() {
        sh(
            &rig.mnt,
            &env,
            "chown 1234:5678 a/f && test \"$(stat -c %u:%g a/f)\" = 1234:5678",
        );
    }
    if have("setfattr") && have("getfattr") {
        sh(
            &rig.mnt,
            &env,
            r#"
            setfattr -n user.color -v blue a/f
            setfattr -n user.size -v big a/f
            test "$(getfattr --only-values -n user.color a/f)" = blue
            getfattr -d a/f | grep -q 'user.size="big"'
            setfattr -x user.size a/f
            ! getfattr -n user.size a/f 2>/dev/null
            "#,
        );
    } else {
        note("setfattr/getfattr not installed (Debian attr): xattr part skipped");
    }
    if have("sqlite3") {
        sh(
            &rig.mnt,
            &env,
            r#"
            sqlite3 db.sqlite "create table t(id integer primary key, v text);
                begin; insert into t(v) values('a'),('b'),('c'); commit;
                begin; insert into t(v) values('rolled back'); rollback;"
            i=0; while [ $i -lt 20 ]; do
                sqlite3 db.sqlite "begin; insert into t(v) values('r$i'); commit;"; i=$((i+1))
            done
            test "$(sqlite3 db.sqlite 'select count(*) from t')" = 23
            test "$(sqlite3 db.sqlite 'pragma integrity_check')" = ok
            sqlite3 wal.sqlite "pragma journal_mode=wal; create table w(x);
                insert into w values(1),(2),(3);"
            test "$(sqlite3 wal.sqlite 'select sum(x) from w')" = 6
            "#,
        );
    } else {
        note("sqlite3 not installed: SQLite part skipped");
    }
    if have("git") {
        sh(
            &rig.mnt,
            &env,
            &format!(
                r#"
                {GIT} init -q repo
                cp -r "$SRC" repo/src
                cd repo
                {GIT} add -A && {GIT} commit -qm one
                echo '// change' >> src/lib.rs
                {GIT} commit -qam two
                git mv src/lib.rs src/lib2.rs && {GIT} commit -qm three
                test "$(git rev-list --count HEAD)" = 3
                git fsck --full 2>&1
                "#
            ),
        );
    } else {
        note("git not installed: git part skipped");
    }

    // Open handles survive unlink and rename-over; attributes are fresh at once.
    let mut h = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(rig.path("open-unlinked"))
        .unwrap();
    h.write_all(b"still here").unwrap();
    std::fs::remove_file(rig.path("open-unlinked")).unwrap();
    h.write_all_at(b"STILL", 0).unwrap();
    let mut buf = [0u8; 10];
    h.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"STILL here");
    let mut victim = File::open(rig.path("a/rand")).unwrap();
    std::fs::write(rig.path("new"), b"replacement").unwrap();
    std::fs::rename(rig.path("new"), rig.path("a/rand")).unwrap();
    let mut old = Vec::new();
    victim.read_to_end(&mut old).unwrap();
    assert_eq!(old, std::fs::read(scratch.join("rand")).unwrap());
    drop(victim);
    drop(h);
    assert_eq!(std::fs::read(rig.path("a/rand")).unwrap(), b"replacement");
    std::fs::write(rig.path("n1"), b"x").unwrap();
    assert_eq!(std::fs::metadata(rig.path("n1")).unwrap().nlink(), 1);
    std::fs::hard_link(rig.path("n1"), rig.path("n2")).unwrap();
    assert_eq!(std::fs::metadata(rig.path("n1")).unwrap().nlink(), 2);
    std::fs::remove_file(rig.path("n2")).unwrap();
    assert_eq!(std::fs::metadata(rig.path("n1")).unwrap().nlink(), 1);
    let before = std::fs::metadata(rig.path("n1")).unwrap().ctime_nsec();
    let before_s = std::fs::metadata(rig.path("n1")).unwrap().ctime();
    std::fs::set_permissions(rig.path("n1"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let after = std::fs::metadata(rig.path("n1")).unwrap();
    assert_eq!(after.mode() & 0o777, 0o600);
    // The daemon and the kernel stamp times from the same coarse clock: a change within
    // the same tick may keep the time, never move it back.
    assert!(
        (after.ctime(), after.ctime_nsec()) >= (before_s, before),
        "ctime went back"
    );

    // A Unix socket bound on the mount (mknod of a socket), and a block device node.
    {
        use std::os::unix::fs::FileTypeExt;
        use std::os::unix::net::{UnixListener, UnixStream};
        let listener = UnixListener::bind(rig.path("sock")).unwrap();
        let mut client = UnixStream::connect(rig.path("sock")).unwrap();
        client.write_all(b"ping").unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let mut got = [0u8; 4];
        server.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
        let ft = std::fs::symlink_metadata(rig.path("sock"))
            .unwrap()
            .file_type();
        assert!(ft.is_socket());
    }
    if unsafe_is_root() {
        let path = std::ffi::CString::new(s(&rig.path("blk"))).unwrap();
        // SAFETY: mknod with a NUL-terminated path.
        let rc = unsafe { libc::mknod(path.as_ptr(), libc::S_IFBLK | 0o600, libc::makedev(8, 1)) };
        assert_eq!(rc, 0, "mknod: {}", std::io::Error::last_os_error());
    }

    m.unmount();
    rig.fsck_clean();

    // Everything is still there after a remount (from the checkpoint).
    let m = rig.mount(&[]);
    sh(
        &rig.mnt,
        &env,
        r#"
        diff -r "$SRC" tree
        diff -r "$SRC" y
        test "$(cat a/f)" = other
        test "$(stat -c %a a/f)" = 640
        test "$(stat -c %Y a/f)" = 981173106
        test "$(readlink a/soft)" = f
        test "$(stat -c %s a/sparse)" = 5000001
        test "$(stat -c %s a/big)" = 10
        test "$(cat a/rand)" = replacement
        test "$(cat a/log | wc -l)" = 2
        test -p a/fifo && test -c a/null && test -d a/c2 && test -d a/b2
        test "$(stat -c %a a/c2)" = 2755
        test "$(ls many | wc -l)" = 200
        test ! -e open-unlinked
        test "$(stat -c %h n1)" = 1
        test -S sock
        if [ "$(id -u)" = 0 ]; then test -b blk && test "$(stat -c %t,%T blk)" = 8,1; fi
        "#,
    );
    if have("getfattr") {
        sh(
            &rig.mnt,
            &env,
            "test \"$(getfattr --only-values -n user.color a/f)\" = blue",
        );
    }
    if have("sqlite3") {
        sh(
            &rig.mnt,
            &env,
            r#"
            test "$(sqlite3 db.sqlite 'select count(*) from t')" = 23
            test "$(sqlite3 db.sqlite 'pragma integrity_check')" = ok
            test "$(sqlite3 wal.sqlite 'select sum(x) from w')" = 6
            "#,
        );
    }
    if have("git") {
        sh(
            &rig.mnt.join("repo"),
            &env,
            "test \"$(git rev-list --count HEAD)\" = 3 && git fsck --full 2>&1 && git status --porcelain | wc -l | grep -qx 0",
        );
    }
    m.unmount();
    rig.fsck_clean();
}

/// One step of the exerciser, for the failure report.
#[derive(Debug, Clone)]
enum Op {
    Write { file: usize, off: u64, len: usize },
    Read { file: usize, off: u64, len: usize },
    Truncate { file: usize, size: u64 },
    Reopen { file: usize },
    Fsync { file: usize },
    Check { file: usize },
}

/// fsx in miniature: random writes at random offsets, truncates (shrink and grow), reads,
/// close/reopen and fsync on a few files through ordinary file I/O; every read is compared
/// with an in-memory copy. Then unmount, fsck, remount, compare everything again.
fn fsx(name: &str, mount_opts: &[&str], default_ops: usize) {
    if !fuse_ready(name) {
        return;
    }
    let long = std::env::var("NANDKIT_LONG").is_ok_and(|v| v == "1");
    let ops = if long { default_ops * 100 } else { default_ops };
    let seed: u64 = std::env::var("NANDKIT_FSX_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x6E61_6E64);
    eprintln!("{name}: {ops} operations, seed {seed} (NANDKIT_FSX_SEED to replay)");
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let rig = Rig::new(&["--geometry", "mlc-1g", "--device-size", "64MiB"]);
    let m = rig.mount(mount_opts);
    const FILES: usize = 4;
    const MAX_SIZE: u64 = 3 << 20;
    let paths: Vec<PathBuf> = (0..FILES).map(|i| rig.path(&format!("fsx{i}"))).collect();
    let open = |p: &Path| {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(p)
            .unwrap()
    };
    let mut files: Vec<File> = paths.iter().map(|p| open(p)).collect();
    let mut model: Vec<Vec<u8>> = vec![Vec::new(); FILES];
    let mut recent: VecDeque<Op> = VecDeque::new();
    let fail = |recent: &VecDeque<Op>, what: String| -> ! {
        panic!("{what}\nseed {seed}; last operations (oldest first):\n{recent:#?}");
    };
    for step in 0..ops {
        let file = rng.gen_range(0..FILES);
        let size = model[file].len() as u64;
        let op = match rng.gen_range(0..100) {
            0..=39 => {
                // Mostly small, sometimes chunk-sized and aligned, sometimes large.
                let len = match rng.gen_range(0..4) {
                    0 => rng.gen_range(1..=64),
                    1 => 4096,
                    2 => rng.gen_range(1..=8192),
                    _ => rng.gen_range(1..=65536),
                };
                let off = if rng.gen_bool(0.2) {
                    size
                } else {
                    rng.gen_range(0..=MAX_SIZE.min(size + 65536))
                };
                let off = if rng.gen_bool(0.3) { off & !4095 } else { off };
                Op::Write { file, off, len }
            }
            40..=59 => Op::Read {
                file,
                off: rng.gen_range(0..=size + 100),
                len: rng.gen_range(1..=70000),
            },
            60..=69 => Op::Truncate {
                file,
                size: if rng.gen_bool(0.5) {
                    rng.gen_range(0..=size)
                } else {
                    rng.gen_range(0..=MAX_SIZE)
                },
            },
            70..=79 => Op::Reopen { file },
            80..=84 => Op::Fsync { file },
            _ => Op::Check { file },
        };
        if recent.len() == 24 {
            recent.pop_front();
        }
        recent.push_back(op.clone());
        match op {
            Op::Write { file, off, len } => {
                let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                if let Err(e) = files[file].write_all_at(&data, off) {
                    fail(&recent, format!("step {step}: write: {e}"));
                }
                let m = &mut model[file];
                let end = off as usize + len;
                if m.len() < end {
                    m.resize(end, 0);
                }
                m[off as usize..end].copy_from_slice(&data);
            }
            Op::Read { file, off, len } => {
                let mut buf = vec![0u8; len];
                let mut got = 0;
                loop {
                    match files[file].read_at(&mut buf[got..], off + got as u64) {
                        Ok(0) => break,
                        Ok(n) => got += n,
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(e) => fail(&recent, format!("step {step}: read: {e}")),
                    }
                    if got == len {
                        break;
                    }
                }
                let m = &model[file];
                let want = &m[(off as usize).min(m.len())..(off as usize + len).min(m.len())];
                if &buf[..got] != want {
                    let at = buf[..got]
                        .iter()
                        .zip(want)
                        .position(|(a, b)| a != b)
                        .unwrap_or(got.min(want.len()));
                    fail(
                        &recent,
                        format!(
                            "step {step}: read of file {file} at {off}+{len}: got {got} bytes, \
                             expected {}; first difference at byte {}",
                            want.len(),
                            off as usize + at
                        ),
                    );
                }
            }
            Op::Truncate { file, size } => {
                if let Err(e) = files[file].set_len(size) {
                    fail(&recent, format!("step {step}: truncate: {e}"));
                }
                model[file].resize(size as usize, 0);
            }
            Op::Reopen { file } => {
                files[file] = open(&paths[file]);
            }
            Op::Fsync { file } => {
                if let Err(e) = files[file].sync_all() {
                    fail(&recent, format!("step {step}: fsync: {e}"));
                }
            }
            Op::Check { file } => {
                let len = files[file].metadata().unwrap().len();
                if len != model[file].len() as u64 {
                    fail(
                        &recent,
                        format!(
                            "step {step}: file {file} is {len} bytes, expected {}",
                            model[file].len()
                        ),
                    );
                }
                let on_disk = std::fs::read(&paths[file]).unwrap();
                if on_disk != model[file] {
                    fail(&recent, format!("step {step}: file {file} content differs"));
                }
            }
        }
    }
    drop(files);
    for (i, p) in paths.iter().enumerate() {
        assert!(
            std::fs::read(p).unwrap() == model[i],
            "file {i} differs at the end"
        );
    }
    m.unmount();
    rig.fsck_clean();
    let m = rig.mount(&[]);
    for (i, p) in paths.iter().enumerate() {
        assert!(
            std::fs::read(p).unwrap() == model[i],
            "file {i} differs after remount (seed {seed})"
        );
    }
    m.unmount();
    rig.fsck_clean();
}

#[test]
fn fsx_random_io_matches_a_model_across_remount() {
    fsx("fsx_random_io_matches_a_model_across_remount", &[], 8000);
}

#[test]
fn fsx_without_writeback_cache_and_four_threads() {
    fsx(
        "fsx_without_writeback_cache_and_four_threads",
        &["-o", "nowriteback,threads=4"],
        4000,
    );
}

#[test]
fn signals_unmount_cleanly_even_when_busy() {
    if !fuse_ready("signals_unmount_cleanly_even_when_busy") {
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny"]);

    // Foreground: SIGINT (Ctrl-C) unmounts, flushes and exits 0.
    let log = File::create(rig.dir.path().join("fg.log")).unwrap();
    let mut child: Child = Command::new(BIN)
        .args(["mount", s(&rig.img), s(&rig.mnt), "--foreground"])
        .args(rig.nvram_args())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    wait_until("the foreground mount", Duration::from_secs(20), || {
        is_mounted(&rig.mnt)
    });
    std::fs::write(rig.path("fg"), b"written in the foreground").unwrap();
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = wait_child(&mut child, Duration::from_secs(30));
    assert!(status.success(), "foreground mount exited {status}");
    assert!(!is_mounted(&rig.mnt));
    rig.fsck_clean();

    // Background daemon, busy mount point: SIGTERM detaches it; the daemon finishes (and
    // flushes) only when the last open file closes.
    let mut args = vec!["mount", s(&rig.img), s(&rig.mnt)];
    args.extend(rig.nvram_args());
    let o = nandkit(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let pid = daemon_pid(&o);
    wait_until("the mount", Duration::from_secs(20), || {
        is_mounted(&rig.mnt)
    });
    assert_eq!(
        std::fs::read(rig.path("fg")).unwrap(),
        b"written in the foreground"
    );
    let mut busy = File::create(rig.path("busy")).unwrap();
    busy.write_all(b"before ").unwrap();
    unsafe { libc::kill(pid, libc::SIGTERM) };
    wait_until("the lazy unmount", Duration::from_secs(20), || {
        !is_mounted(&rig.mnt)
    });
    busy.write_all(b"after detach").unwrap();
    assert!(!gone(pid), "the daemon quit while a file was still open");
    drop(busy);
    wait_until("the daemon to exit", Duration::from_secs(30), || gone(pid));
    rig.fsck_clean();
    let m = rig.mount(&[]);
    assert_eq!(
        std::fs::read(rig.path("busy")).unwrap(),
        b"before after detach"
    );
    m.unmount();
}

/// The daemon's pid, from `nandkit mount`'s "mounted ... (daemon pid N)" line.
/// A nandkit command running in the background, its stderr read line by line as it comes.
struct Running {
    what: String,
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn start(args: &[&str]) -> Running {
        let mut child = Command::new(BIN)
            .args(args)
            .env_remove("RUST_BACKTRACE")
            .env_remove("NANDKIT_TEST_UNMOUNT_GATE")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running {
            what: args.join(" "),
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a line of stderr containing `want`. The timeout only stops a hung test;
    /// it decides nothing (the daemon waits for the gate, so the line must come first).
    fn expect_line(&mut self, want: &str) {
        loop {
            match self.lines.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => {
                    let found = line.contains(want);
                    self.seen.push(line);
                    if found {
                        return;
                    }
                }
                Err(e) => panic!(
                    "`nandkit {}`: no {want:?} on stderr ({e}); it said:\n{}",
                    self.what,
                    self.seen.join("\n")
                ),
            }
        }
    }

    /// Waits for the command to exit; its status, stdout, and all of its stderr.
    fn finish(mut self) -> (std::process::ExitStatus, String, String) {
        let mut out = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let status = wait_child(&mut self.child, Duration::from_secs(120));
        // The sender is gone once the command (and any daemon it left, for mount) has
        // closed its stderr.
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(60)) {
            self.seen.push(line);
        }
        (status, out, self.seen.join("\n"))
    }
}

/// `nandkit mount` whose daemon, once unmounting, waits for `gate` to exist before it
/// writes anything out. Returns the daemon's pid.
fn mount_gated(rig: &Rig, gate: &Path, log: &Path) -> i32 {
    let o = Command::new(BIN)
        .args(["mount", s(&rig.img), s(&rig.mnt), "--log", s(log)])
        .args(rig.nvram_args())
        .env("NANDKIT_TEST_UNMOUNT_GATE", gate)
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap();
    assert!(o.status.success(), "mount: {}", text(&o.stderr));
    wait_until("the mount in /proc/mounts", Duration::from_secs(20), || {
        is_mounted(&rig.mnt)
    });
    daemon_pid(&o)
}

fn fusermount_u(mnt: &Path) {
    let o = Command::new("fusermount3")
        .arg("-u")
        .arg(mnt)
        .output()
        .unwrap();
    assert!(o.status.success(), "fusermount3 -u: {}", text(&o.stderr));
}

/// `fusermount3 -u M` returns while the daemon still holds the image (flushing, writing its
/// checkpoint). Every command that takes the image's lock must wait for it, say so, and
/// then work, instead of failing with "is mounted". The daemon is held in that state by
/// the test gate, so nothing here depends on timing.
#[test]
fn commands_right_after_unmount_wait_for_the_daemon() {
    if !fuse_ready("commands_right_after_unmount_wait_for_the_daemon") {
        return;
    }
    // The daemon's life, not a profile's: the checks below name the baseline's output.
    let rig = Rig::new(&["--geometry", "tiny", "--profile", "yaffs"]);
    let gate = rig.dir.path().join("gate");
    let log = rig.dir.path().join("daemon.log");
    let owner = rig.dir.path().join("nand.img.owner");
    let waiting = |pid: i32| format!("waiting for the daemon (pid {pid}) to finish unmounting");

    // 1. The readers: fsck, info, dump, all at once.
    let pid = mount_gated(&rig, &gate, &log);
    assert!(
        std::fs::read_to_string(&owner)
            .unwrap()
            .contains("state=serving"),
        "the daemon does not say it is serving"
    );
    std::fs::create_dir(rig.path("d")).unwrap();
    for i in 0..50 {
        std::fs::write(rig.path(&format!("d/f{i}")), format!("file {i}")).unwrap();
    }
    std::fs::write(rig.path("big"), vec![0x5Au8; 1 << 20]).unwrap();
    // Mounted and serving: refused at once, as before.
    let o = nandkit(&["info", s(&rig.img)]);
    assert!(
        !o.status.success() && text(&o.stderr).contains("is mounted on"),
        "{}",
        text(&o.stderr)
    );
    fusermount_u(&rig.mnt);
    let mut fsck = Running::start(&["fsck", s(&rig.img)]);
    let mut info = Running::start(&["info", s(&rig.img)]);
    let mut dump = Running::start(&["dump", s(&rig.img)]);
    for r in [&mut fsck, &mut info, &mut dump] {
        r.expect_line(&waiting(pid));
    }
    assert!(
        std::fs::read_to_string(&owner)
            .unwrap()
            .contains("state=unmounting"),
        "the daemon does not say it is unmounting"
    );
    assert!(!gone(pid), "the daemon left before the gate opened");
    std::fs::write(&gate, b"").unwrap();
    let (status, out, err) = fsck.finish();
    assert!(status.success(), "fsck {status}:\n{out}{err}");
    assert!(out.contains("is clean"), "{out}");
    assert!(
        out.contains("checkpoint: present, agrees with the scan"),
        "{out}"
    );
    assert!(!err.contains("is mounted"), "{err}");
    for (name, r) in [("info", info), ("dump", dump)] {
        let (status, out, err) = r.finish();
        assert!(status.success(), "{name} {status}:\n{out}{err}");
    }
    // The daemon had withdrawn its word before it let go of the image.
    assert!(!owner.exists(), "{} left behind", owner.display());
    wait_until("the daemon to exit", Duration::from_secs(30), || gone(pid));
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(said.contains("checkpoint written"), "{said}");
    std::fs::remove_file(&gate).unwrap();

    // 2. mount: the next mount waits for the last one to finish, then serves its files.
    let pid = mount_gated(&rig, &gate, &log);
    std::fs::write(rig.path("second"), b"from the second mount").unwrap();
    fusermount_u(&rig.mnt);
    let mut mount = Running::start(&["mount", s(&rig.img), s(&rig.mnt)]);
    mount.expect_line(&waiting(pid));
    std::fs::write(&gate, b"").unwrap();
    let (status, out, err) = mount.finish();
    assert!(status.success(), "mount {status}:\n{out}{err}");
    let m = Mounted {
        mnt: rig.mnt.clone(),
        done: false,
    };
    wait_until("the mount in /proc/mounts", Duration::from_secs(20), || {
        is_mounted(&rig.mnt)
    });
    assert_eq!(
        std::fs::read(rig.path("second")).unwrap(),
        b"from the second mount"
    );
    assert_eq!(std::fs::read(rig.path("d/f7")).unwrap(), b"file 7");
    m.unmount();
    std::fs::remove_file(&gate).unwrap();

    // 3. mkfs --force (the exclusive lock, like mount).
    let pid = mount_gated(&rig, &gate, &log);
    fusermount_u(&rig.mnt);
    let mut mkfs = Running::start(&["mkfs", "--force", s(&rig.img)]);
    mkfs.expect_line(&waiting(pid));
    std::fs::write(&gate, b"").unwrap();
    let (status, out, err) = mkfs.finish();
    assert!(status.success(), "mkfs {status}:\n{out}{err}");
    assert!(!owner.exists());
    rig.fsck_clean();
}

#[test]
fn read_only_mount_refuses_writes() {
    if !fuse_ready("read_only_mount_refuses_writes") {
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny"]);
    let m = rig.mount(&[]);
    std::fs::write(rig.path("kept"), b"data").unwrap();
    m.unmount();
    let m = rig.mount(&["-o", "ro"]);
    assert_eq!(std::fs::read(rig.path("kept")).unwrap(), b"data");
    let e = std::fs::write(rig.path("new"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    let e = std::fs::remove_file(rig.path("kept")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    m.unmount();
    rig.fsck_clean();
}

#[test]
fn full_device_answers_enospc_and_stays_consistent() {
    if !fuse_ready("full_device_answers_enospc_and_stays_consistent") {
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny"]);
    let m = rig.mount(&[]);
    let chunk = vec![0xA5u8; 1 << 20];
    let mut f = File::create(rig.path("fill")).unwrap();
    let mut written = 0usize;
    // Twice what the device holds (NANDKIT_TEST_GEOMETRY may give a larger one).
    let enough = {
        // SAFETY: statvfs(3) into a zeroed struct, with a NUL-terminated path.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        let p = std::ffi::CString::new(s(&rig.mnt)).unwrap();
        assert_eq!(unsafe { libc::statvfs(p.as_ptr(), &mut st) }, 0);
        2 * (st.f_blocks as usize) * (st.f_frsize as usize)
    };
    // With the write-back cache (the default) writes land in the page cache, and near the
    // end each write asks the daemon first (see its `mount::gate`): write(2) says ENOSPC
    // as without the cache. (Should a write-back be refused, fsync says it.)
    let err = loop {
        match f.write(&chunk) {
            Ok(n) => written += n,
            Err(e) => break e,
        }
        if written >= enough {
            break f.sync_all().unwrap_err();
        }
    };
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
    drop(f);
    // The writer was stopped with less than one write's margin left; a file opened now
    // writes through (direct I/O) and gets ENOSPC at write(2) once that is gone too.
    let mut more = File::create(rig.path("more")).unwrap();
    let mut extra = 0;
    let e = loop {
        match more.write(&chunk) {
            Ok(n) => extra += n,
            Err(e) => break e,
        }
        assert!(extra < enough, "{extra} more bytes accepted, no error");
    };
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
    more.sync_all().unwrap();
    drop(more);
    std::fs::remove_file(rig.path("fill")).unwrap();
    let _ = std::fs::remove_file(rig.path("more"));
    let mut after = File::create(rig.path("after")).unwrap();
    after.write_all(b"room again").unwrap();
    after.sync_all().unwrap();
    drop(after);
    m.unmount();
    rig.fsck_clean();
}

#[test]
fn permissions_are_enforced_for_other_users() {
    if !fuse_ready("permissions_are_enforced_for_other_users") {
        return;
    }
    if !unsafe_is_root() || !have("setpriv") {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED permissions_are_enforced_for_other_users: needs root and setpriv"
        );
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny"]);
    // The mount point must be reachable by the other user.
    std::fs::set_permissions(rig.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let m = rig.mount(&["-o", "allow_other"]);
    std::fs::set_permissions(&rig.mnt, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(rig.path("public"), b"hi").unwrap();
    std::fs::write(rig.path("secret"), b"no").unwrap();
    std::fs::set_permissions(rig.path("secret"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let as_nobody = |script: &str| {
        Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "sh",
                "-c",
                script,
            ])
            .current_dir("/")
            .output()
            .unwrap()
    };
    let mnt = s(&rig.mnt);
    assert!(as_nobody(&format!("cat {mnt}/public")).status.success());
    let o = as_nobody(&format!("cat {mnt}/secret"));
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("Permission denied"),
        "{}",
        text(&o.stderr)
    );
    let o = as_nobody(&format!("touch {mnt}/intruder"));
    assert!(
        !o.status.success(),
        "created a file in a 0755 root directory"
    );
    m.unmount();

    // Without allow_other, other users cannot even look.
    let m = rig.mount(&[]);
    let o = as_nobody(&format!("ls {mnt}"));
    assert!(!o.status.success());
    m.unmount();
    rig.fsck_clean();
}

/// The root directory of a new file system belongs to whoever ran mkfs (as mke2fs gives
/// it): a user who makes an image and mounts it can write there. Before, it was root's,
/// 0755, and a user's own mount refused them.
#[test]
fn the_root_directory_belongs_to_who_made_the_image() {
    if !fuse_ready("the_root_directory_belongs_to_who_made_the_image") {
        return;
    }
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let img = dir.path().join("user.img");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    // As root, mkfs runs as nobody (65534); otherwise as this user.
    let (uid, gid) = if unsafe_is_root() {
        (65534, 65534)
    } else {
        unsafe { (libc::getuid(), libc::getgid()) }
    };
    let mut mkfs = Command::new(BIN);
    mkfs.args(["mkfs", s(&img), "--geometry", "tiny"]);
    if unsafe_is_root() {
        mkfs.uid(uid).gid(gid);
    }
    let o = mkfs.output().unwrap();
    assert!(o.status.success(), "mkfs: {}", text(&o.stderr));
    let o = nandkit(&["mount", s(&img), s(&mnt)]);
    assert!(o.status.success(), "mount: {}", text(&o.stderr));
    wait_until("the mount", Duration::from_secs(20), || is_mounted(&mnt));
    let m = Mounted {
        mnt: mnt.clone(),
        done: false,
    };
    let meta = std::fs::metadata(&mnt).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (uid, gid));
    assert_eq!(meta.mode() & 0o7777, 0o755);
    m.unmount();
}

/// An array formatted with a UBI per chip (MA as its paper built it) mounts through FUSE,
/// serves files, and after each unmount attaches again with its data, fsck checking every
/// chip's map; `info` shows the UBI.
#[test]
fn a_ubi_array_serves_files_and_attaches_again() {
    if !fuse_ready("a_ubi_array_serves_files_and_attaches_again") {
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny", "--chips", "4", "--ubi", "on"]);
    let files: Vec<(String, Vec<u8>)> = (0..6u8)
        .map(|i| {
            let len = 40_000 + 70_000 * usize::from(i);
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(u64::from(i));
            let mut data = vec![0u8; len];
            rng.fill(&mut data[..]);
            (format!("f{i}"), data)
        })
        .collect();
    let m = rig.mount(&[]);
    for (name, data) in &files {
        let mut f = File::create(rig.path(name)).unwrap();
        f.write_all(data).unwrap();
        f.sync_all().unwrap();
    }
    // Rewrite one: its old LEBs are unmapped and erased in the background.
    std::fs::write(rig.path("f0"), &files[1].1).unwrap();
    m.unmount();
    rig.fsck_clean();
    let info = nandkit(&["info", s(&rig.img)]);
    assert!(info.status.success());
    assert!(
        text(&info.stdout).contains("UBI          one per chip"),
        "{}",
        text(&info.stdout)
    );
    let m = rig.mount(&[]);
    for (name, data) in &files[1..] {
        assert_eq!(&std::fs::read(rig.path(name)).unwrap(), data, "{name}");
    }
    assert_eq!(std::fs::read(rig.path("f0")).unwrap(), files[1].1);
    m.unmount();
    rig.fsck_clean();
}

/// An array with parity keeps serving reads and writes when one chip's image file is
/// deleted under the mount, and the daemon logs the failure once; `info` says degraded;
/// `rebuild` puts a new chip in, after which fsck is clean, every file reads as before,
/// and the array survives losing another chip.
#[test]
fn a_parity_array_survives_a_deleted_chip_image_and_rebuilds() {
    if !fuse_ready("a_parity_array_survives_a_deleted_chip_image_and_rebuilds") {
        return;
    }
    let rig = Rig::new(&[
        "--geometry",
        "tiny",
        "--device-size",
        "16MiB",
        "--chips",
        "4",
        "--parity",
    ]);
    let log = rig.dir.path().join("daemon.log");
    let chip_file = |k: u32| PathBuf::from(format!("{}.chip{k}", rig.img.display()));
    let make = |i: u8| {
        let len = 30_000 + 55_000 * usize::from(i);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(100 + u64::from(i));
        let mut data = vec![0u8; len];
        rng.fill(&mut data[..]);
        (format!("f{i}"), data)
    };
    let mut files: Vec<(String, Vec<u8>)> = (0..5u8).map(make).collect();
    let m = rig.mount(&["--log", s(&log)]);
    for (name, data) in &files {
        let mut f = File::create(rig.path(name)).unwrap();
        f.write_all(data).unwrap();
        f.sync_all().unwrap();
    }
    std::fs::remove_file(chip_file(2)).unwrap();
    for (name, data) in &files {
        assert_eq!(
            &std::fs::read(rig.path(name)).unwrap(),
            data,
            "{name}, degraded"
        );
    }
    // Writes go on over the three chips left.
    for i in 5..8u8 {
        let (name, data) = make(i);
        let mut f = File::create(rig.path(&name)).unwrap();
        f.write_all(&data).unwrap();
        f.sync_all().unwrap();
        files.push((name, data));
    }
    std::fs::write(rig.path("f0"), &files[7].1).unwrap();
    files[0].1 = files[7].1.clone();
    for (name, data) in &files {
        assert_eq!(
            &std::fs::read(rig.path(name)).unwrap(),
            data,
            "{name}, degraded"
        );
    }
    m.unmount();
    let logged = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        logged.matches("chip 2 of the array has failed").count(),
        1,
        "logged once: {logged}"
    );
    let info = nandkit(&["info", s(&rig.img)]);
    assert!(info.status.success(), "{}", text(&info.stderr));
    assert!(
        text(&info.stdout).contains("DEGRADED: chip 2"),
        "{}",
        text(&info.stdout)
    );
    let json = nandkit(&["info", s(&rig.img), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["array_state"], "degraded");
    rig.fsck_clean();

    let r = nandkit(&["rebuild", s(&rig.img), "--chip", "2"]);
    assert!(r.status.success(), "{}{}", text(&r.stdout), text(&r.stderr));
    assert!(chip_file(2).exists());
    let info = nandkit(&["info", s(&rig.img)]);
    assert!(
        text(&info.stdout).contains("every chip present"),
        "{}",
        text(&info.stdout)
    );
    rig.fsck_clean();
    // Redundancy is back: another chip may go.
    std::fs::remove_file(chip_file(1)).unwrap();
    let m = rig.mount(&[]);
    for (name, data) in &files {
        assert_eq!(
            &std::fs::read(rig.path(name)).unwrap(),
            data,
            "{name}, after rebuild"
        );
    }
    m.unmount();
    rig.fsck_clean();
}
