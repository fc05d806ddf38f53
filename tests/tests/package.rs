//! The Debian package (`deploy/debian/build-deb`) installed in a fresh Debian 12 container (the
//! image `deploy/debian/base-image` makes with debootstrap): the strand user, its data directory,
//! the example configuration as a conffile, the unit installed and not enabled, man pages and
//! completions; the node started under the package's user from `/etc/strand/node.toml` as
//! installed; a bead created; the package upgraded to a second build with the node's data and
//! the edited configuration kept; the bead still there. Bad input: a `/var/lib/strand` of another
//! user refuses the install and stays as it was; a node started without its configuration names
//! the file and the example; a purge keeps the data and the configuration.
//!
//! The packages hold this test's own build (the dev binaries, stripped); `make package` builds
//! the release one.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tests::strand_binary;

fn deploy(script: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/debian").join(script)
}

fn ok(output: Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// A container of the fresh Debian image, removed on drop.
struct Host(String);

impl Host {
    fn start(image: &str) -> Host {
        let name = format!("strand-package-{}-{}", std::process::id(), tests::free_port());
        ok(
            Command::new("docker").args(["run", "-d", "--name", &name, image, "sleep", "infinity"]).output().unwrap(),
            "docker run",
        );
        Host(name)
    }

    /// Runs a shell command in it; answers its output.
    fn sh(&self, script: &str) -> Output {
        Command::new("docker").args(["exec", &self.0, "sh", "-c", script]).output().unwrap()
    }

    fn copy_in(&self, file: &Path, to: &str) {
        ok(Command::new("docker").arg("cp").arg(file).arg(format!("{}:{to}", self.0)).output().unwrap(), "docker cp");
    }

    /// Starts the node as the package's user, from the installed configuration, and waits until
    /// it answers.
    fn start_node(&self) {
        ok(
            self.sh(
                "setpriv --reuid=strand --regid=strand --init-groups strand node --config /etc/strand/node.toml > /tmp/node.log 2>&1 &
                 echo $! > /tmp/node.pid
                 for i in $(seq 300); do strand cluster status >/dev/null 2>&1 && exit 0; sleep 0.2; done
                 cat /tmp/node.log; exit 1",
            ),
            "the node's start",
        );
    }

    /// Stops the node (SIGTERM, as systemd does) and waits until it has exited (gone, or a zombie:
    /// the container's first process reaps nothing).
    fn stop_node(&self) {
        ok(
            self.sh(
                "pid=$(cat /tmp/node.pid); kill -TERM $pid
                 for i in $(seq 300); do grep -qs '^State:.*[RSD]' /proc/$pid/status || exit 0; sleep 0.1; done; exit 1",
            ),
            "the node's stop",
        );
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rm", "-f", &self.0]).output();
    }
}

#[test]
fn the_package_installs_runs_its_node_and_upgrades_keeping_the_data_and_the_configuration() {
    let image = ok(Command::new(deploy("base-image")).output().unwrap(), "deploy/debian/base-image");
    let binaries = strand_binary().parent().unwrap().to_path_buf();
    let out = tempfile::tempdir().unwrap();
    let build = |revision: &str| {
        let built = Command::new(deploy("build-deb"))
            .arg("--bin-dir")
            .arg(&binaries)
            .args(["--revision", revision, "--out"])
            .arg(out.path())
            .output()
            .unwrap();
        PathBuf::from(ok(built, "build-deb"))
    };
    let (first, second) = (build("1"), build("2"));

    let host = Host::start(&image);
    host.copy_in(&first, "/tmp/strand-1.deb");
    host.copy_in(&second, "/tmp/strand-2.deb");
    let installed = ok(host.sh("dpkg -i /tmp/strand-1.deb"), "the install");
    assert!(installed.contains("installed, not started. Edit /etc/strand/node.toml"), "{installed}");
    let layout = ok(
        host.sh(
            "id -un strand; stat -c '%U %a' /var/lib/strand; test -x /usr/bin/strand && test -x /usr/bin/strand-node && echo binaries;
             grep -c LimitNOFILE=65536 /usr/lib/systemd/system/strand.service;
             test -e /etc/systemd/system/multi-user.target.wants/strand.service && echo enabled || echo disabled;
             dpkg-query -W -f='${Conffiles}\\n' strand | awk 'NF {print $1}';
             test -s /usr/share/man/man1/strand.1.gz && test -s /usr/share/man/man1/strand-create.1.gz && echo man;
             grep -q complete /usr/share/bash-completion/completions/strand && test -s /usr/share/zsh/vendor-completions/_strand && echo completions;
             cmp /etc/strand/node.toml /usr/share/doc/strand/examples/node.toml && echo example",
        ),
        "the layout",
    );
    assert_eq!(
        layout.lines().collect::<Vec<_>>(),
        ["strand", "strand 750", "binaries", "1", "disabled", "/etc/strand/node.toml", "man", "completions", "example"],
        "{layout}"
    );
    // The version names the build the package was made from.
    let version: serde_json::Value = serde_json::from_str(&ok(host.sh("strand version --json"), "version")).unwrap();
    let ours: serde_json::Value =
        serde_json::from_slice(&Command::new(strand_binary()).args(["version", "--json"]).output().unwrap().stdout)
            .unwrap();
    assert_eq!(version["build"], ours["build"], "{version}");

    // The node runs as the strand user from the configuration as installed.
    host.start_node();
    let created: serde_json::Value =
        serde_json::from_str(&ok(host.sh("strand create 'kept across the upgrade' --json"), "create")).unwrap();
    let id = created["id"].as_str().unwrap().to_string();
    assert_eq!(ok(host.sh("stat -c %U /proc/$(cat /tmp/node.pid)"), "the node's user"), "strand");

    // The upgrade: the node stopped, the configuration edited, the second build installed.
    host.stop_node();
    ok(host.sh("echo '# edited by the operator' >> /etc/strand/node.toml"), "the edit");
    let upgraded = ok(host.sh("dpkg -i /tmp/strand-2.deb && dpkg-query -W -f='${Version}' strand"), "the upgrade");
    assert!(upgraded.ends_with("-2"), "{upgraded}");
    assert!(ok(host.sh("tail -1 /etc/strand/node.toml"), "tail").contains("edited by the operator"));
    host.start_node();
    let shown: serde_json::Value =
        serde_json::from_str(&ok(host.sh(&format!("strand show {id} --json")), "show")).unwrap();
    assert_eq!(shown[0]["title"], "kept across the upgrade", "{shown}");
    host.stop_node();

    // Without its configuration the node says which file and where the example is.
    ok(host.sh("mv /etc/strand/node.toml /tmp/node.toml"), "mv");
    let missing =
        host.sh("setpriv --reuid=strand --regid=strand --init-groups strand node --config /etc/strand/node.toml");
    let said = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(2), "{said}");
    assert!(
        said.contains("/etc/strand/node.toml does not exist")
            && said.contains("/usr/share/doc/strand/examples/node.toml"),
        "{said}"
    );
    ok(host.sh("mv /tmp/node.toml /etc/strand/node.toml"), "mv back");

    // A purge keeps the data and a copy of the configuration, and says where.
    let purged = ok(host.sh("dpkg --purge strand"), "the purge");
    assert!(purged.contains("kept the node's data in /var/lib/strand"), "{purged}");
    let kept =
        ok(host.sh("test -d /var/lib/strand/db && echo data; tail -1 /etc/strand/node.toml.dpkg-bak"), "what was kept");
    assert_eq!(kept, "data\n# edited by the operator");

    // Another user's /var/lib/strand: the install is refused and changes nothing there.
    let other = Host::start(&image);
    other.copy_in(&first, "/tmp/strand-1.deb");
    ok(other.sh("useradd --system keeper && mkdir /var/lib/strand && chown keeper /var/lib/strand && chmod 700 /var/lib/strand"), "setup");
    let refused = other.sh("dpkg -i /tmp/strand-1.deb");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "the install went through: {said}");
    assert!(
        said.contains("/var/lib/strand exists and belongs to keeper, not to the strand user; nothing was changed"),
        "{said}"
    );
    let state = ok(other.sh("stat -c '%U %a' /var/lib/strand; id strand >/dev/null 2>&1 && echo user || echo no-user; test -e /usr/bin/strand && echo binary || echo no-binary"), "state");
    assert_eq!(state.lines().collect::<Vec<_>>(), ["keeper 700", "no-user", "no-binary"], "{state}");
}
