//! The shipped monitoring and deployment files against the real binary: the Prometheus rules
//! pass `promtool check rules` and their unit tests, a live `/metrics` passes `promtool check
//! metrics` and names every metric the rules and the Grafana dashboard query, and the systemd
//! unit, the Kubernetes manifests and the Dockerfile name flags, ports and probe paths the
//! binary has. `promtool` comes from Debian's `prometheus` package (`make promtool`).

mod common;

use common::daemon::{Daemon, free_port, scrape, wait_until};
use common::{World, late_job, now_ms, spec};
use redis::Commands;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `promtool`: `$BULLSWEEP_PROMTOOL`, else where `make promtool` extracts it.
fn promtool() -> PathBuf {
    let path = std::env::var_os("BULLSWEEP_PROMTOOL")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".tools/prometheus/usr/bin/promtool"));
    assert!(
        path.is_file(),
        "promtool is missing at {}: run `make promtool` (it extracts Debian's prometheus package)",
        path.display()
    );
    path
}

/// Runs promtool, feeding `stdin`; panics with its output unless it succeeds.
fn run_promtool(args: &[&str], dir: &Path, stdin: Option<&str>) -> String {
    let mut child = Command::new(promtool())
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs");
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        std::io::Write::write_all(&mut pipe, text.as_bytes()).expect("stdin");
    }
    let out = child.wait_with_output().expect("promtool output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

#[test]
fn the_rules_pass_promtool_and_their_unit_tests() {
    let dir = root().join("deploy/prometheus");
    let checked = run_promtool(&["check", "rules", "bullsweep.rules.yml"], &dir, None);
    assert!(checked.contains("10 rules found"), "{checked}");
    run_promtool(&["test", "rules", "bullsweep.rules.test.yml"], &dir, None);
    // Every alert of the README's table, and of `bullsweep alerts`, is in the file.
    let rules = read("deploy/prometheus/bullsweep.rules.yml");
    let readme = read("README.md");
    for alert in [
        "BullsweepDown",
        "BullsweepSweepStale",
        "BullsweepBacklogOverPolicy",
        "BullsweepRedisMemoryHigh",
        "BullsweepRedisEvictions",
        "BullsweepCostLeak",
        "BullsweepAuditShippingStuck",
        "BullsweepQueueFailing",
        "BullsweepSourceUnavailable",
        "BullsweepQueueDamaged",
    ] {
        assert!(rules.contains(&format!("alert: {alert}\n")), "{alert}");
        assert!(
            readme.contains(&format!("`{alert}`")),
            "README lacks {alert}"
        );
    }
}

/// The `bullsweep_…` metric names an expression uses.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = expr;
    while let Some(i) = rest.find("bullsweep_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    out
}

/// The sample names of a scrape (`name{…} value` or `name value`).
fn sample_names(metrics: &str) -> BTreeSet<String> {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_string)
        .collect()
}

#[test]
fn a_live_daemon_passes_the_lint_and_has_every_metric_the_rules_and_dashboard_query() {
    let w = World::new();
    let now = now_ms();
    w.seed(spec("bull:acme:mail", 50, 5, 3), now);
    let policy = w.policy(
        "version: 1\nschedule: 1h\ndiscovery: { layouts: ['bull:{tenant}:{queue}'] }\nsources: { users: { redis: { key: 'user:{key}' } } }\ndoctor: { repair: [danglingIds] }\npolicies:\n  - { name: mail, queueNamePattern: mail, mode: both, sla: { maxDataAgeHours: 48 }, rules: { completed: { maxAge: 1d, maxCount: 10 }, failed: { maxAge: 1d } }, jobs: [{ name: welcome, source: { name: users, key: data.userId }, deleteWhen: never }] }\n",
    );
    let port = free_port();
    let daemon = Daemon::start(&w, &policy, Some(port), &[]);
    let mut con = w.con();
    wait_until("the first sweep", Duration::from_secs(30), || {
        con.hexists::<_, _, bool>("bullsweep:lastrun", "bull:acme:mail")
            .unwrap_or(false)
    });
    // A job announced on the events stream, for the event lag.
    late_job(&mut con, "bull:acme:mail", "5000", now - 2 * 86_400_000);
    let mut metrics = String::new();
    wait_until(
        "the event lag and the measures",
        Duration::from_secs(30),
        || {
            let _: Result<String, _> = redis::cmd("XADD")
                .arg("bull:acme:mail:events")
                .arg("*")
                .arg("event")
                .arg("completed")
                .arg("jobId")
                .arg("5000")
                .query(&mut con);
            std::thread::sleep(Duration::from_millis(300));
            metrics = scrape(port);
            metrics.contains("bullsweep_event_lag_seconds{")
                && metrics.contains("bullsweep_queue_memory_bytes{")
                && metrics.contains("bullsweep_doctor_findings{")
        },
    );
    let body = metrics
        .split_once("\r\n\r\n")
        .map_or(metrics.as_str(), |(_, b)| b)
        .to_string();
    assert!(
        metrics.contains("content-type: text/plain; version=0.0.4"),
        "{metrics}"
    );
    run_promtool(&["check", "metrics"], &root(), Some(&body));
    let have = sample_names(&body);

    let rules = read("deploy/prometheus/bullsweep.rules.yml");
    for name in metric_names(&rules) {
        assert!(
            have.contains(&name),
            "the rules query {name}, absent from:\n{body}"
        );
    }
    let dashboard: Value =
        serde_json::from_str(&read("deploy/grafana/bullsweep.json")).expect("dashboard JSON");
    let mut queries = 0;
    let mut titles = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        titles.push(panel["title"].as_str().unwrap_or("").to_string());
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("expr");
            queries += 1;
            for name in metric_names(expr) {
                assert!(
                    have.contains(&name),
                    "panel {:?} queries {name}, absent from a live /metrics:\n{body}",
                    panel["title"]
                );
            }
        }
    }
    assert!(queries >= 20, "{queries} queries");
    for wanted in [
        "tenant",
        "Memory per queue",
        "by action",
        "Backlog",
        "Longest",
        "Event lag",
        "alerts",
    ] {
        assert!(
            titles.iter().any(|t| t.contains(wanted)),
            "no panel about {wanted}: {titles:?}"
        );
    }
    daemon.stop();
}

/// `bullsweep daemon --help`.
fn daemon_help() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .args(["daemon", "--help"])
        .output()
        .expect("help");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every `--flag` in `args` is one the binary knows.
fn flags_exist(args: &[String], what: &str) {
    let help = daemon_help();
    for flag in args.iter().filter(|a| a.starts_with("--")) {
        assert!(
            help.contains(&format!("{flag} "))
                || help.contains(&format!("{flag}\n"))
                || help.contains(&format!("{flag}="))
                || help.contains(&format!("{flag} <")),
            "{what} passes {flag}, which `bullsweep daemon` does not take"
        );
    }
}

fn yaml(path: &str) -> Value {
    serde_saphyr::from_str(&read(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_systemd_unit_is_hardened_and_runs_the_daemon() {
    let unit = read("deploy/systemd/bullsweep.service");
    let value = |key: &str| -> Vec<String> {
        unit.lines()
            .filter_map(|l| l.strip_prefix(&format!("{key}=")))
            .map(str::to_string)
            .collect()
    };
    for (key, want) in [
        ("DynamicUser", "yes"),
        ("ProtectSystem", "strict"),
        ("StateDirectory", "bullsweep"),
        ("NoNewPrivileges", "yes"),
        ("ExecReload", "/bin/kill -HUP $MAINPID"),
        ("WorkingDirectory", "/var/lib/bullsweep"),
    ] {
        assert_eq!(value(key), vec![want.to_string()], "{key}");
    }
    let exec = value("ExecStart");
    let args: Vec<String> = exec[0].split_whitespace().map(str::to_string).collect();
    assert_eq!(args[0], "/usr/local/bin/bullsweep");
    let daemon_at = args
        .iter()
        .position(|a| a == "daemon")
        .expect("runs the daemon");
    assert_eq!(
        args[1..daemon_at],
        ["--config", "/etc/bullsweep/policies.yaml"]
    );
    flags_exist(&args[daemon_at + 1..], "the systemd unit");
    assert!(args.contains(&"127.0.0.1:10464".to_string()));
    // The Redis URL comes from the environment file, under the name the binary reads.
    assert!(unit.contains("BULLSWEEP_REDIS_URL"));
    assert!(
        String::from_utf8_lossy(
            &Command::new(env!("CARGO_BIN_EXE_bullsweep"))
                .arg("--help")
                .output()
                .expect("help")
                .stdout
        )
        .contains("BULLSWEEP_REDIS_URL")
    );
    assert_eq!(value("KillSignal"), vec!["SIGTERM".to_string()]);
    // Descriptors for the connection cap and for the work: far more than the 1,024 systemd
    // gives by default, under which idle connections once starved the audit file.
    let nofile: Vec<u64> = value("LimitNOFILE")
        .iter()
        .filter_map(|v| v.parse().ok())
        .collect();
    assert!(
        nofile.len() == 1 && nofile[0] >= 8192,
        "LimitNOFILE: {nofile:?}"
    );
    // The daemon lowers its threads' priority and may raise its soft descriptor limit, both
    // in @resources: a filtered call must fail, not kill the process.
    assert!(unit.contains("SystemCallFilter=~@privileged @resources"));
    assert_eq!(value("SystemCallErrorNumber"), vec!["EPERM".to_string()]);
}

/// Every `--flag` a file names, comments included.
fn flags_named(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(str::to_string)
        .collect()
}

#[test]
fn the_kubernetes_manifests_agree_with_each_other_and_the_binary() {
    let deployment = yaml("deploy/kubernetes/deployment.yaml");
    let spec = &deployment["spec"];
    assert_eq!(deployment["kind"], "Deployment");
    assert_eq!(spec["replicas"], 2);
    let pod = &spec["template"]["spec"];
    let c = &pod["containers"][0];
    let args: Vec<String> = c["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("arg").to_string())
        .collect();
    let daemon_at = args
        .iter()
        .position(|a| a == "daemon")
        .expect("runs the daemon");
    flags_exist(&args[daemon_at + 1..], "the Deployment");
    let comments: Vec<String> = read("deploy/kubernetes/deployment.yaml")
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix('#'))
        .flat_map(flags_named)
        .collect();
    assert!(comments.iter().any(|f| f == "--dashboard"), "{comments:?}");
    flags_exist(&comments, "the Deployment's comments");
    let port_name = assert_the_probes_use_the_metrics_port(c, &args);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_the_policy_file_is_the_configmap_mounted(pod, &args);
    assert_the_redis_url_comes_from_the_secret(c);
    assert_the_pods_are_selected_and_scraped(spec, &port_name);
}

/// Value of `flag` in `args` (the argument after it).
fn arg_after<'a>(args: &'a [String], flag: &str) -> &'a String {
    &args[args.iter().position(|a| a == flag).expect(flag) + 1]
}

/// Prometheus and the probes use the metrics listener, which never needs a token: the
/// container's port is `--metrics-listen`'s, and the probes name it. Returns its name.
fn assert_the_probes_use_the_metrics_port(c: &Value, args: &[String]) -> String {
    let listen = arg_after(args, "--metrics-listen");
    let port: u64 = listen
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    assert_eq!(c["ports"][0]["containerPort"], port);
    let port_name = c["ports"][0]["name"].as_str().expect("port name");
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(c[probe]["httpGet"]["port"], port_name, "{probe}");
    }
    port_name.to_string()
}

/// The policy file the args name is where the ConfigMap is mounted, and it is valid.
fn assert_the_policy_file_is_the_configmap_mounted(pod: &Value, args: &[String]) {
    let c = &pod["containers"][0];
    let config = arg_after(args, "--config");
    let mount = c["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .find(|m| m["name"] == "policies")
        .expect("policies mount");
    let configmap = yaml("deploy/kubernetes/configmap.yaml");
    let file = configmap["data"]
        .as_object()
        .expect("data")
        .keys()
        .next()
        .expect("a policy file")
        .clone();
    assert_eq!(
        config,
        &format!("{}/{file}", mount["mountPath"].as_str().expect("path"))
    );
    let volume = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == "policies")
        .expect("policies volume");
    assert_eq!(volume["configMap"]["name"], configmap["metadata"]["name"]);
    // The policy file in the ConfigMap is valid.
    let text = configmap["data"][&file].as_str().expect("policy text");
    bullsweep_policy::compile("policies.yaml", text).expect("the ConfigMap's policy compiles");
}

/// The Redis URL from the Secret, under the name the binary reads.
fn assert_the_redis_url_comes_from_the_secret(c: &Value) {
    let env = &c["env"][0];
    assert_eq!(env["name"], "BULLSWEEP_REDIS_URL");
    let secret = yaml("deploy/kubernetes/secret.yaml");
    assert_eq!(
        env["valueFrom"]["secretKeyRef"]["name"],
        secret["metadata"]["name"]
    );
    let key = env["valueFrom"]["secretKeyRef"]["key"]
        .as_str()
        .expect("key");
    assert!(
        secret["stringData"][key].is_string(),
        "the Secret has {key}"
    );
}

/// The PDB, Service and ServiceMonitor select the pods of the Deployment `spec` and scrape
/// the metrics port `port_name`.
fn assert_the_pods_are_selected_and_scraped(spec: &Value, port_name: &str) {
    let labels = &spec["template"]["metadata"]["labels"];
    let pdb = yaml("deploy/kubernetes/poddisruptionbudget.yaml");
    assert_eq!(pdb["kind"], "PodDisruptionBudget");
    assert_eq!(&pdb["spec"]["selector"]["matchLabels"], labels);
    let service = yaml("deploy/kubernetes/service.yaml");
    assert_eq!(&service["spec"]["selector"], labels);
    assert_eq!(service["spec"]["ports"][0]["targetPort"], port_name);
    let monitor = yaml("deploy/kubernetes/servicemonitor.yaml");
    assert_eq!(monitor["kind"], "ServiceMonitor");
    assert_eq!(
        monitor["spec"]["endpoints"][0]["port"],
        service["spec"]["ports"][0]["name"]
    );
    assert_eq!(monitor["spec"]["endpoints"][0]["path"], "/metrics");
}

#[test]
fn the_dockerfile_builds_in_stages_and_runs_distroless_as_non_root() {
    let file = read("Dockerfile");
    let froms: Vec<&str> = file.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert!(froms.len() >= 2, "multi-stage: {froms:?}");
    let last = froms.last().expect("a final stage");
    assert!(
        last.contains("distroless") && last.contains("nonroot"),
        "{last}"
    );
    assert!(
        file.lines().any(|l| l.starts_with("USER nonroot")),
        "non-root"
    );
    assert!(
        file.contains("COPY --from=build /src/target/release/bullsweep /usr/local/bin/bullsweep")
    );
    assert!(file.contains("ENTRYPOINT [\"/usr/local/bin/bullsweep\"]"));
    let cmd = file
        .lines()
        .find_map(|l| l.strip_prefix("CMD "))
        .expect("CMD");
    let args: Vec<String> = serde_json::from_str(cmd).expect("CMD is a JSON list");
    let daemon_at = args
        .iter()
        .position(|a| a == "daemon")
        .expect("runs the daemon");
    flags_exist(&args[daemon_at + 1..], "the Dockerfile");
    let port = arg_after(&args, "--listen")
        .rsplit(':')
        .next()
        .expect("port")
        .to_string();
    assert!(
        file.lines().any(|l| l == format!("EXPOSE {port}")),
        "EXPOSE {port}"
    );
}
