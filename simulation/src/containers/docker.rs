//! The container run's hands on Docker: the `deploy/` compose cluster started and removed through
//! `deploy/cluster.sh` under a project of the run's own, and what the nemesis does to its
//! containers: kill, start, pause, a SIGTERM stop, a network disconnect, and iptables rules
//! inside a container's network namespace (entered with `nsenter` from the host, since the image
//! holds nothing but Strand).
//!
//! Invariant: every container, network and volume the run makes carries its compose project's
//! name, and [`Deployment::remove`] (also run on drop) removes them all, whatever state the run
//! left them in.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The image of a rolling upgrade's newer build ([`Deployment::build_next_image`]).
pub const NEXT_IMAGE: &str = "strand:apply-next";
/// The newer build's image with the planted bug: its canary rule decided by the build.
pub const UNGATED_IMAGE: &str = "strand:apply-next-ungated";

/// Runs `program` with `args`; answers its stdout, or what it printed when it failed.
pub fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let output = Command::new(program).args(args).output().map_err(|error| format!("cannot run {program}: {error}"))?;
    text(program, args, output)
}

fn text(program: &str, args: &[&str], output: Output) -> Result<String, String> {
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).trim().to_string());
    }
    Err(format!(
        "`{program} {}` failed ({}): {}{}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stderr).trim(),
        String::from_utf8_lossy(&output.stdout).trim()
    ))
}

/// Why the container run cannot run here, or `None` when it can: Docker must answer, and the run
/// must be able to enter containers' network namespaces (root, `nsenter` and `iptables`).
pub fn unavailable() -> Option<String> {
    if let Err(error) = run("docker", &["info", "--format", "{{.ServerVersion}}"]) {
        return Some(format!("Docker is not available ({error}); start the Docker daemon, or run where it is"));
    }
    if compose_program().is_none() {
        return Some("neither docker-compose nor `docker compose` is installed; install docker-compose".into());
    }
    for tool in ["nsenter", "iptables"] {
        if run("sh", &["-c", &format!("command -v {tool}")]).is_err() {
            return Some(format!("{tool} is not installed; install util-linux and iptables"));
        }
    }
    if run("id", &["-u"]).as_deref() != Ok("0") {
        return Some("entering a container's network namespace needs root; run as root".into());
    }
    None
}

/// `docker-compose`, or `docker compose`, whichever answers.
fn compose_program() -> Option<Vec<String>> {
    if run("docker-compose", &["version"]).is_ok() {
        return Some(vec!["docker-compose".into()]);
    }
    run("docker", &["compose", "version"]).is_ok().then(|| vec!["docker".into(), "compose".into()])
}

/// One compose cluster of `deploy/`, under its own project name, host ports and directory.
#[derive(Debug)]
pub struct Deployment {
    /// `deploy/`.
    pub deploy_dir: PathBuf,
    /// The strand binary the image is built from (strand-node beside it).
    pub strand: PathBuf,
    /// Certificates, node configs, the admin token and client.toml: a temporary directory that
    /// lives as long as the deployment, so a `cluster.sh` call under way when the run is dropped
    /// still finds it.
    pub cluster_dir: tempfile::TempDir,
    /// The compose project.
    pub project: String,
    /// Host ports of nodes 1 to 4's client listeners.
    pub ports: [u16; 4],
    /// Whether the newer build's image carries the planted bug ([`UNGATED_IMAGE`]).
    pub ungated_canary: bool,
}

impl Deployment {
    fn script(&self, args: &[&str]) -> Result<String, String> {
        let mut command = Command::new(self.deploy_dir.join("cluster.sh"));
        command
            .args(args)
            .env("STRAND_BIN", &self.strand)
            .env("STRAND_CLUSTER_DIR", self.dir())
            .env("STRAND_PROJECT", &self.project);
        for (index, port) in self.ports.iter().enumerate() {
            command.env(format!("STRAND_PORT_{}", index + 1), port.to_string());
        }
        let output = command.output().map_err(|error| format!("cannot run deploy/cluster.sh: {error}"))?;
        text("deploy/cluster.sh", args, output)
    }

    /// `deploy/cluster.sh up`: builds the image, makes certificates and configs, starts three
    /// nodes and turns auth on.
    pub fn up(&self) -> Result<String, String> {
        self.script(&["up"])
    }

    /// `deploy/cluster.sh join`: node 4 joins as a learner on a fresh volume and is promoted.
    pub fn join(&self) -> Result<String, String> {
        self.script(&["join"])
    }

    /// `deploy/cluster.sh upgrade ID IMAGE`: node `id`'s container made again from `image` on its
    /// volume (stopped with SIGTERM first), then caught up.
    pub fn upgrade(&self, id: u64, image: &str) -> Result<String, String> {
        self.script(&["upgrade", &id.to_string(), image])
    }

    /// Builds [`NEXT_IMAGE`]: the image `up` built, started in the test-only apply-next mode
    /// (`STRAND_TEST_APPLY_NEXT=1`: the debug build applies one apply version more), the newer
    /// build of a rolling upgrade.
    /// With `ungated`, the image's canary rule is decided by its build
    /// (`STRAND_TEST_UNGATED_CANARY`): the planted bug the run must catch.
    pub fn build_next_image(&self, ungated: bool) -> Result<(), String> {
        use std::io::Write as _;
        let mut dockerfile = format!("FROM strand:dev\nENV {}=1\n", api::version::TEST_APPLY_NEXT_ENV);
        if ungated {
            dockerfile.push_str(&format!("ENV {}=1\n", api::version::UNGATED_CANARY_ENV));
        }
        let mut child = Command::new("docker")
            .args(["build", "-q", "-t", self.next_image(), "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|error| format!("cannot run docker build: {error}"))?;
        child
            .stdin
            .take()
            .expect("stdin is piped")
            .write_all(dockerfile.as_bytes())
            .map_err(|error| format!("cannot write to docker build: {error}"))?;
        let output = child.wait_with_output().map_err(|error| format!("docker build: {error}"))?;
        text("docker", &["build", "-t", self.next_image()], output).map(drop)
    }

    /// The newer build's image of this run: [`NEXT_IMAGE`], or [`UNGATED_IMAGE`] with the
    /// planted bug.
    pub fn next_image(&self) -> &'static str {
        if self.ungated_canary { UNGATED_IMAGE } else { NEXT_IMAGE }
    }

    /// The directory of certificates, node configs, the admin token and client.toml.
    pub fn dir(&self) -> &Path {
        self.cluster_dir.path()
    }

    /// The id of node `id`'s container, if it exists.
    pub fn container(&self, id: u64) -> Option<String> {
        let project = format!("label=com.docker.compose.project={}", self.project);
        let service = format!("label=com.docker.compose.service=node{id}");
        let found = run("docker", &["ps", "-aq", "--filter", &project, "--filter", &service]).ok()?;
        found.lines().next().map(str::to_string)
    }

    fn node_container(&self, id: u64) -> Result<String, String> {
        self.container(id).ok_or(format!("node {id} has no container in project {}", self.project))
    }

    /// The compose network's name.
    pub fn network(&self) -> String {
        format!("{}_strand", self.project)
    }

    /// `docker kill` (SIGKILL).
    pub fn kill(&self, id: u64) -> Result<(), String> {
        run("docker", &["kill", &self.node_container(id)?]).map(drop)
    }

    /// `docker stop` with a grace period: SIGTERM, so the node drains, then SIGKILL.
    pub fn stop(&self, id: u64, grace_s: u64) -> Result<(), String> {
        run("docker", &["stop", "-t", &grace_s.to_string(), &self.node_container(id)?]).map(drop)
    }

    /// `docker start`.
    pub fn start(&self, id: u64) -> Result<(), String> {
        run("docker", &["start", &self.node_container(id)?]).map(drop)
    }

    /// `docker pause` (the cgroup freezer: the process stops, its sockets stay open).
    pub fn pause(&self, id: u64) -> Result<(), String> {
        run("docker", &["pause", &self.node_container(id)?]).map(drop)
    }

    /// `docker unpause`.
    pub fn unpause(&self, id: u64) -> Result<(), String> {
        run("docker", &["unpause", &self.node_container(id)?]).map(drop)
    }

    /// The container's state: running, paused, exited, ...
    pub fn state(&self, id: u64) -> Result<String, String> {
        run("docker", &["inspect", "-f", "{{.State.Status}}", &self.node_container(id)?])
    }

    /// `docker network disconnect` from the compose network.
    pub fn disconnect(&self, id: u64) -> Result<(), String> {
        run("docker", &["network", "disconnect", &self.network(), &self.node_container(id)?]).map(drop)
    }

    /// `docker network connect` to the compose network, under the node's host name.
    pub fn connect(&self, id: u64) -> Result<(), String> {
        let alias = format!("node{id}");
        run("docker", &["network", "connect", "--alias", &alias, &self.network(), &self.node_container(id)?]).map(drop)
    }

    /// Whether the container is attached to the compose network.
    pub fn connected(&self, id: u64) -> Result<bool, String> {
        let networks = run(
            "docker",
            &[
                "inspect",
                "-f",
                "{{range $name, $_ := .NetworkSettings.Networks}}{{$name}} {{end}}",
                &self.node_container(id)?,
            ],
        )?;
        Ok(networks.split_whitespace().any(|name| name == self.network()))
    }

    /// The container's address on the compose network.
    pub fn address(&self, id: u64) -> Result<String, String> {
        let format = format!("{{{{(index .NetworkSettings.Networks \"{}\").IPAddress}}}}", self.network());
        let address = run("docker", &["inspect", "-f", &format, &self.node_container(id)?])?;
        if address.is_empty() || address == "<no value>" {
            return Err(format!("node {id} has no address on {}", self.network()));
        }
        Ok(address)
    }

    /// Runs `iptables ARGS` inside node `id`'s network namespace.
    pub fn iptables(&self, id: u64, args: &[&str]) -> Result<(), String> {
        let pid = run("docker", &["inspect", "-f", "{{.State.Pid}}", &self.node_container(id)?])?;
        if pid == "0" {
            return Err(format!("node {id}'s container is not running"));
        }
        let mut command = vec!["-t", pid.as_str(), "-n", "iptables"];
        command.extend_from_slice(args);
        run("nsenter", &command).map(drop)
    }

    /// Drops every packet node `id` receives from `from` (an address), or, with `chance`, that
    /// share of them.
    pub fn drop_from(&self, id: u64, from: &str, chance: Option<f64>) -> Result<(), String> {
        match chance {
            None => self.iptables(id, &["-A", "INPUT", "-s", from, "-j", "DROP"]),
            Some(chance) => self.iptables(
                id,
                &[
                    "-A",
                    "INPUT",
                    "-s",
                    from,
                    "-m",
                    "statistic",
                    "--mode",
                    "random",
                    "--probability",
                    &format!("{chance:.2}"),
                    "-j",
                    "DROP",
                ],
            ),
        }
    }

    /// Removes every filter rule the run added in node `id`'s namespace.
    pub fn clear_rules(&self, id: u64) -> Result<(), String> {
        self.iptables(id, &["-F", "INPUT"])
    }

    /// Node `id`'s container log (stdout and stderr), written to `path`.
    pub fn save_logs(&self, id: u64, path: &Path) -> Result<(), String> {
        let container = self.node_container(id)?;
        let output = Command::new("docker")
            .args(["logs", "--timestamps", &container])
            .output()
            .map_err(|error| format!("cannot run docker logs: {error}"))?;
        let mut log = output.stdout;
        log.extend_from_slice(&output.stderr);
        std::fs::write(path, log).map_err(|error| format!("cannot write {}: {error}", path.display()))
    }

    /// Removes every container, network and volume of the project.
    pub fn remove(&self) {
        remove_project(&self.project);
    }
}

/// Removes every container, network and volume of the compose project `project`.
pub fn remove_project(project: &str) {
    let label = format!("label=com.docker.compose.project={project}");
    if let Ok(containers) = run("docker", &["ps", "-aq", "--filter", &label]) {
        let ids: Vec<&str> = containers.lines().collect();
        if !ids.is_empty() {
            let mut args = vec!["rm", "-f", "-v"];
            args.extend(ids);
            let _ = run("docker", &args);
        }
    }
    if let Ok(volumes) = run("docker", &["volume", "ls", "-q", "--filter", &label]) {
        for volume in volumes.lines() {
            let _ = run("docker", &["volume", "rm", "-f", volume]);
        }
    }
    let _ = run("docker", &["network", "rm", &format!("{project}_strand")]);
}

impl Drop for Deployment {
    fn drop(&mut self) {
        self.remove();
    }
}

/// The name prefix of the container runs' compose projects.
pub const PROJECT_PREFIX: &str = "strandjepsen";

/// Removes what earlier container runs left behind when they were killed before their cleanup
/// (their process is gone): projects named [`PROJECT_PREFIX`] and a pid no live process has.
pub fn remove_abandoned() {
    let Ok(projects) = run("docker", &["ps", "-a", "--format", "{{.Label \"com.docker.compose.project\"}}"]) else {
        return;
    };
    let mut seen = std::collections::BTreeSet::new();
    for project in projects.lines().filter(|name| name.starts_with(PROJECT_PREFIX)) {
        let Some(pid) = project[PROJECT_PREFIX.len()..].split('x').next().and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() || !seen.insert(project.to_string()) {
            continue;
        }
        remove_project(project);
    }
}
