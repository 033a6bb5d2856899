//! bench-compare: the benchmark regression report (issue 8). Measures two revisions on this machine
//! in one job, interleaving their rounds, and writes a markdown report with a chart; the logic
//! lives in `ferrite_benches::compare` (unit-tested), this file is the git and process plumbing.
//!
//! What it does, in order:
//! 1. Resolves the two revisions to commits. BASE defaults to `git merge-base HEAD main`. CHANGE
//!    defaults to the working tree: it is snapshotted into a commit object that no ref points to,
//!    through a temporary index (`GIT_INDEX_FILE=... git add -A; git write-tree; git
//!    commit-tree`), so tracked edits and untracked, non-ignored files are included while the
//!    checkout, its index, its branches and its stash stay untouched. A clean tree is just HEAD.
//! 2. Checks each commit out in its own detached worktree under the work dir (default
//!    `target/bench-compare/`, ignored by git), and writes this tool's copy of `kernel_counts.rs`
//!    into both so the same counting harness runs against each side's C library.
//! 3. Builds each once with its own CARGO_TARGET_DIR (kept between runs, so rebuilds are
//!    incremental) and without FERRITE_LIB_DIR: ferrite-sys's build.rs compiles the C sources at
//!    -O2. No Bazel.
//! 4. Runs the criterion suites interleaved: round 1 base, round 1 change, round 2 base, ... so
//!    that drift in the machine's load hits both sides. Each run gets an empty CRITERION_HOME and
//!    its `new/estimates.json` files are copied out right after it.
//! 5. Counts instructions of each counter scenario on each side under callgrind (several runs per
//!    side, so the count's own repeatability is measured too).
//! 6. Writes the report (+ SVG), and with `--aa` the noise file, with `--pin-reference` the
//!    reference. Removes the worktrees (and prunes them) on the way out, also on errors.
//!
//! Exit status: 0 after writing the report; 1 with `--gate` when a row regressed beyond its
//! noise; 2 on a usage or run error.

use ferrite_benches::compare::counters::{compare_counts, parse_callgrind_totals, CountSample, Reference};
use ferrite_benches::compare::criterion::read_run;
use ferrite_benches::compare::noise::{measure_aa, Machine, NoiseFile, NoiseRun, NoiseSample, TIME_RULE};
use ferrite_benches::compare::report::{headline, render_markdown, HostInfo, ReportMeta};
use ferrite_benches::compare::rows::{build_rows, exit_code, sort_worst_first};
use ferrite_benches::compare::stats::{aggregate_rounds, Side as SideResult};
use ferrite_benches::compare::svg;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

type Result<T> = std::result::Result<T, String>;

/// The counting harness, compiled into this tool and written into both worktrees.
const KERNEL_COUNTS_RS: &str = include_str!("kernel_counts.rs");

const DEFAULT_CRITERION_ARGS: &str = "--noplot --warm-up-time 1 --measurement-time 1 --sample-size 10";
const DEFAULT_BENCHES: [&str; 2] = ["kernels", "sampling"];
const WORKING_TREE: &str = "WORKTREE";

const USAGE: &str = "\
usage: bench-compare [OPTIONS] [BASE [CHANGE]]

  BASE     revision to compare against (default: git merge-base HEAD main)
  CHANGE   revision to measure (default: the working tree, uncommitted changes included;
           spell it WORKTREE to name it explicitly)

options:
  --aa REV              A/A run: REV on both sides; merges each scenario's spread into the noise
                        file (which keeps the largest spread of each scenario over its A/A runs)
  --aa-fresh            with --aa: start this machine's noise file over instead of merging
  --gate                exit 1 when a row is slower beyond its noise or has more instructions
                        beyond the count threshold (without it: always exit 0 after the report)
  --rounds N            rounds per side, interleaved (default 3)
  --bench NAME          a criterion bench to run; repeatable (default: kernels, sampling)
  --filter REGEX        criterion's filter (the timed scenarios)
  --counter-filter RE   narrows the counted scenarios (default: all of kernel-counts --list; they
                        are cheap and load-independent, so every report has them)
  --criterion-args S    arguments after `--` for criterion (default: \"--noplot --warm-up-time 1
                        --measurement-time 1 --sample-size 10\")
  --report PATH         the markdown report (default target/bench-compare/report.md); the chart
                        goes beside it with the extension .svg
  --machine NAME        the machine's name in the noise file (default: from the CPU model and count)
  --noise PATH          the noise file (default benches/noise/<machine>.json)
  --reference PATH      the pinned reference (default benches/baseline/reference.json)
  --pin-reference       rewrite the reference from the CHANGE side of this run
  --counter KIND        callgrind (default), perf (only where `perf stat -e instructions true`
                        works), or none
  --counter-reps N      calls per counted process (default 3)
  --counter-runs N      counted processes per scenario and side (default 3)
  --work-dir DIR        worktrees, target dirs and raw results (default target/bench-compare)
  --keep-worktrees      leave the worktrees in place (for debugging; remove them with
                        `git worktree remove --force DIR` and `git worktree prune`)";

// ------------------------------------------------------------------------------------------------
// Options

#[derive(Clone, Copy, Debug, PartialEq)]
enum CounterKind {
    Callgrind,
    Perf,
    None,
}

#[derive(Debug)]
struct Options {
    base: Option<String>,
    change: Option<String>,
    aa: Option<String>,
    aa_fresh: bool,
    gate: bool,
    rounds: usize,
    benches: Vec<String>,
    filter: Option<String>,
    counter_filter: Option<String>,
    criterion_args: Vec<String>,
    report: Option<PathBuf>,
    machine: Option<String>,
    noise: Option<PathBuf>,
    reference: Option<PathBuf>,
    pin_reference: bool,
    counter: CounterKind,
    counter_reps: u32,
    counter_runs: usize,
    work_dir: Option<PathBuf>,
    keep_worktrees: bool,
}

fn parse_args(args: &[String]) -> Result<Options> {
    let mut o = Options {
        base: None,
        change: None,
        aa: None,
        aa_fresh: false,
        gate: false,
        rounds: 3,
        benches: Vec::new(),
        filter: None,
        counter_filter: None,
        criterion_args: split_args(DEFAULT_CRITERION_ARGS),
        report: None,
        machine: None,
        noise: None,
        reference: None,
        pin_reference: false,
        counter: CounterKind::Callgrind,
        counter_reps: 3,
        counter_runs: 3,
        work_dir: None,
        keep_worktrees: false,
    };
    let mut positional = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().cloned().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--aa" => o.aa = Some(value("--aa")?),
            "--aa-fresh" => o.aa_fresh = true,
            "--gate" => o.gate = true,
            "--rounds" => o.rounds = parse_positive(&value("--rounds")?, "--rounds")?,
            "--bench" => o.benches.push(value("--bench")?),
            "--filter" => o.filter = Some(value("--filter")?),
            "--counter-filter" => o.counter_filter = Some(value("--counter-filter")?),
            "--criterion-args" => o.criterion_args = split_args(&value("--criterion-args")?),
            "--report" => o.report = Some(value("--report")?.into()),
            "--machine" => o.machine = Some(value("--machine")?),
            "--noise" => o.noise = Some(value("--noise")?.into()),
            "--reference" => o.reference = Some(value("--reference")?.into()),
            "--pin-reference" => o.pin_reference = true,
            "--counter" => {
                o.counter = match value("--counter")?.as_str() {
                    "callgrind" => CounterKind::Callgrind,
                    "perf" => CounterKind::Perf,
                    "none" => CounterKind::None,
                    other => return Err(format!("--counter {other}: expected callgrind, perf or none")),
                }
            }
            "--counter-reps" => o.counter_reps = parse_positive(&value("--counter-reps")?, "--counter-reps")? as u32,
            "--counter-runs" => o.counter_runs = parse_positive(&value("--counter-runs")?, "--counter-runs")?,
            "--work-dir" => o.work_dir = Some(value("--work-dir")?.into()),
            "--keep-worktrees" => o.keep_worktrees = true,
            "-h" | "--help" => return Err(String::new()),
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            s => positional.push(s.to_string()),
        }
    }
    if positional.len() > 2 {
        return Err(format!("at most two revisions, got {positional:?}"));
    }
    if o.aa.is_some() && !positional.is_empty() {
        return Err("--aa REV takes no other revisions".into());
    }
    let mut positional = positional.into_iter();
    o.base = positional.next();
    o.change = positional.next();
    if o.benches.is_empty() {
        o.benches = DEFAULT_BENCHES.iter().map(|s| s.to_string()).collect();
    }
    for f in o.filter.iter().chain(&o.counter_filter) {
        regex::Regex::new(f).map_err(|e| format!("filter {f:?}: {e}"))?;
    }
    Ok(o)
}

fn parse_positive(s: &str, name: &str) -> Result<usize> {
    match s.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{name} {s:?}: expected a positive integer")),
    }
}

fn split_args(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

// ------------------------------------------------------------------------------------------------
// Running commands

/// PATH with rustup's ~/.cargo/bin first, as the Makefile has it.
fn path_env() -> String {
    let home = std::env::var("HOME").unwrap_or_default();
    format!("{home}/.cargo/bin:{}", std::env::var("PATH").unwrap_or_default())
}

/// Runs `cmd`, returns its trimmed stdout; the error carries its stderr.
fn output(cmd: &mut Command) -> Result<String> {
    let desc = format!("{cmd:?}");
    let out = cmd.stdin(Stdio::null()).output().map_err(|e| format!("{desc}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{desc} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn git(root: &Path, args: &[&str]) -> Result<String> {
    output(Command::new("git").arg("-C").arg(root).args(args))
}

/// Runs `cmd` with stdout and stderr appended to `log`; an error names the log.
fn run_logged(cmd: &mut Command, log: &Path) -> Result<()> {
    let file = fs::OpenOptions::new().create(true).append(true).open(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = file.try_clone().map_err(|e| e.to_string())?;
    let desc = format!("{cmd:?}");
    let status = cmd.stdin(Stdio::null()).stdout(file).stderr(err).status().map_err(|e| format!("{desc}: {e}"))?;
    if !status.success() {
        return Err(format!("{desc} failed ({status}); see {}", log.display()));
    }
    Ok(())
}

fn fresh_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        fs::remove_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))
}

fn now_utc() -> String {
    output(Command::new("date").args(["-u", "+%Y-%m-%d %H:%M"])).unwrap_or_else(|_| "unknown".into())
}

// ------------------------------------------------------------------------------------------------
// Revisions and worktrees

/// A side's revision: the commit checked out, and how the report names it (in full, and in a
/// few words for the chart's title).
#[derive(Clone, Debug)]
struct Revision {
    commit: String,
    label: String,
    short_label: String,
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(10)]
}

fn resolve(root: &Path, spec: &str) -> Result<Revision> {
    let commit = git(root, &["rev-parse", "--verify", &format!("{spec}^{{commit}}")])?;
    let subject = git(root, &["log", "-1", "--format=%s", &commit])?;
    let named = if spec == commit { String::new() } else { format!("{spec}, ") };
    Ok(Revision { label: format!("`{}` ({named}\"{subject}\")", short(&commit)), short_label: short(&commit).to_string(), commit })
}

fn merge_base(root: &Path) -> Result<Revision> {
    let commit = git(root, &["merge-base", "HEAD", "main"]).map_err(|e| format!("no default BASE: {e}"))?;
    let mut rev = resolve(root, &commit)?;
    rev.label = format!("{} = merge-base of HEAD and main", rev.label);
    Ok(rev)
}

/// The working tree as a commit that no ref points to (see the file comment). The checkout, its
/// index, refs and stash are not touched; only objects are added to the object store.
fn snapshot_working_tree(root: &Path, work: &Path) -> Result<Revision> {
    let head = git(root, &["rev-parse", "HEAD"])?;
    let index = work.join("snapshot.index");
    let _ = fs::remove_file(&index);
    let with_index = |args: &[&str]| output(Command::new("git").arg("-C").arg(root).args(args).env("GIT_INDEX_FILE", &index));
    with_index(&["read-tree", "HEAD"])?;
    with_index(&["add", "-A"])?;
    let tree = with_index(&["write-tree"])?;
    let _ = fs::remove_file(&index);
    if tree == git(root, &["rev-parse", "HEAD^{tree}"])? {
        return Ok(Revision { label: format!("working tree, clean: HEAD `{}`", short(&head)), short_label: short(&head).to_string(), commit: head });
    }
    let commit = output(
        Command::new("git")
            .arg("-C")
            .arg(root)
            .args(["commit-tree", &tree, "-p", &head, "-m", "bench-compare: snapshot of the working tree"])
            .env("GIT_AUTHOR_NAME", "bench-compare")
            .env("GIT_AUTHOR_EMAIL", "bench-compare@localhost")
            .env("GIT_COMMITTER_NAME", "bench-compare")
            .env("GIT_COMMITTER_EMAIL", "bench-compare@localhost"),
    )?;
    Ok(Revision {
        label: format!("working tree: uncommitted changes on HEAD `{}` (snapshot `{}`)", short(&head), short(&commit)),
        short_label: format!("working tree on {}", short(&head)),
        commit,
    })
}

/// The worktrees of this run; removed and pruned on drop, so an error or panic leaves none behind.
struct Worktrees {
    root: PathBuf,
    paths: Vec<PathBuf>,
    keep: bool,
}

impl Worktrees {
    fn add(&mut self, path: &Path, commit: &str) -> Result<()> {
        remove_worktree(&self.root, path);
        let p = path.to_string_lossy().into_owned();
        git(&self.root, &["worktree", "add", "--detach", "--quiet", &p, commit])?;
        self.paths.push(path.to_path_buf());
        Ok(())
    }
}

impl Drop for Worktrees {
    fn drop(&mut self) {
        if self.keep {
            eprintln!("bench-compare: keeping worktrees {:?}", self.paths);
            return;
        }
        for p in &self.paths {
            remove_worktree(&self.root, p);
        }
    }
}

/// Removes a worktree left by this or an interrupted earlier run, and its registration.
fn remove_worktree(root: &Path, path: &Path) {
    let p = path.to_string_lossy().into_owned();
    let _ = git(root, &["worktree", "remove", "--force", &p]);
    let _ = fs::remove_dir_all(path);
    let _ = git(root, &["worktree", "prune"]);
}

/// The work dir must not be a tracked path: inside the repository it has to be ignored.
fn check_work_dir(root: &Path, work: &Path) -> Result<()> {
    fs::create_dir_all(work).map_err(|e| format!("{}: {e}", work.display()))?;
    let work = work.canonicalize().map_err(|e| e.to_string())?;
    if let Ok(rel) = work.strip_prefix(root.canonicalize().map_err(|e| e.to_string())?) {
        let rel = rel.to_string_lossy().into_owned();
        if rel.is_empty() || git(root, &["check-ignore", "-q", &rel]).is_err() {
            return Err(format!("work dir {} is inside the repository and not ignored by git", work.display()));
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// Building a side

/// One side of the comparison, once built.
struct Side {
    name: &'static str,
    rev: Revision,
    worktree: PathBuf,
    target: PathBuf,
    benches: Vec<(String, PathBuf)>,
    counts_exe: Option<PathBuf>,
}

fn cargo(side_worktree: &Path, target: &Path) -> Command {
    let mut c = Command::new("cargo");
    c.current_dir(side_worktree).env("PATH", path_env()).env("CARGO_TARGET_DIR", target).env_remove("FERRITE_LIB_DIR").env_remove("CRITERION_HOME");
    c
}

/// The executables of `cargo ... --message-format=json` artifacts accepted by `want(target)`.
fn artifacts(stdout: &str, want: impl Fn(&serde_json::Value) -> bool) -> Vec<(String, PathBuf)> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && want(&m["target"]))
        .filter_map(|m| Some((m["target"]["name"].as_str()?.to_string(), PathBuf::from(m["executable"].as_str()?))))
        .collect()
}

fn build_side(side: &mut Side, opts: &Options, logs: &Path) -> Result<()> {
    let log = logs.join(format!("build-{}.log", side.name));
    let started = Instant::now();
    let harness = side.worktree.join("benches/src/bin/kernel_counts.rs");
    fs::create_dir_all(harness.parent().unwrap()).map_err(|e| e.to_string())?;
    fs::write(&harness, KERNEL_COUNTS_RS).map_err(|e| format!("{}: {e}", harness.display()))?;

    let mut bench = cargo(&side.worktree, &side.target);
    bench.args(["bench", "--no-run", "-p", "ferrite-benches", "--message-format=json-render-diagnostics"]);
    for b in &opts.benches {
        bench.args(["--bench", b]);
    }
    let stdout = captured(&mut bench, &log)?;
    side.benches = artifacts(&stdout, |t| t["kind"].as_array().is_some_and(|k| k.iter().any(|k| k == "bench")));
    for b in &opts.benches {
        if !side.benches.iter().any(|(n, _)| n == b) {
            return Err(format!("{} ({}): no bench executable {b}; see {}", side.name, side.rev.label, log.display()));
        }
    }
    if opts.counter != CounterKind::None {
        let mut bins = cargo(&side.worktree, &side.target);
        bins.args(["build", "--release", "-p", "ferrite-benches", "--bins", "--message-format=json-render-diagnostics"]);
        // A side whose C API no longer fits the harness still gets timed; its counts are missing.
        side.counts_exe = captured(&mut bins, &log)
            .map(|out| artifacts(&out, |t| t["src_path"].as_str().is_some_and(|p| p.ends_with("kernel_counts.rs"))))
            .ok()
            .and_then(|a| a.into_iter().next().map(|(_, p)| p));
    }
    eprintln!("bench-compare: built {} ({}) in {:.0} s", side.name, short(&side.rev.commit), started.elapsed().as_secs_f64());
    Ok(())
}

/// Runs `cmd` with stdout captured and stderr appended to `log`.
fn captured(cmd: &mut Command, log: &Path) -> Result<String> {
    let file = fs::OpenOptions::new().create(true).append(true).open(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let desc = format!("{cmd:?}");
    let out = cmd.stdin(Stdio::null()).stderr(file).output().map_err(|e| format!("{desc}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{desc} failed ({}); see {}", out.status, log.display()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

// ------------------------------------------------------------------------------------------------
// Timing rounds

/// Round r of base, round r of change, round r+1 of base, ...: each side's estimates of round r
/// end up in `<work>/rounds/<side>/r<r>/`.
fn run_rounds(sides: &[Side], opts: &Options, work: &Path, logs: &Path) -> Result<()> {
    for r in 1..=opts.rounds {
        for side in sides {
            let started = Instant::now();
            let home = work.join(format!("criterion-{}", side.name));
            fresh_dir(&home)?;
            for (name, exe) in &side.benches {
                let mut cmd = Command::new(exe);
                cmd.arg("--bench").args(&opts.filter).args(&opts.criterion_args);
                cmd.current_dir(side.worktree.join("benches")).env("CRITERION_HOME", &home).env_remove("FERRITE_LIB_DIR");
                run_logged(&mut cmd, &logs.join(format!("{}-r{r}-{name}.log", side.name)))?;
            }
            copy_estimates(&home, &home, &work.join(format!("rounds/{}/r{r}", side.name)))?;
            eprintln!("bench-compare: round {r}/{} {}: {:.0} s", opts.rounds, side.name, started.elapsed().as_secs_f64());
        }
    }
    Ok(())
}

/// Copies every `new/estimates.json` below `dir` to the same relative path below `dest`.
fn copy_estimates(root: &Path, dir: &Path, dest: &Path) -> Result<()> {
    let Ok(entries) = fs::read_dir(dir) else { return Ok(()) };
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let file = path.join("estimates.json");
        if entry.file_name() == "new" && file.is_file() {
            let to = dest.join(file.strip_prefix(root).unwrap());
            fs::create_dir_all(to.parent().unwrap()).map_err(|e| e.to_string())?;
            fs::copy(&file, &to).map_err(|e| format!("{}: {e}", file.display()))?;
        } else {
            copy_estimates(root, &path, dest)?;
        }
    }
    Ok(())
}

fn read_side(work: &Path, side: &str, rounds: usize) -> Result<BTreeMap<String, SideResult>> {
    let runs = (1..=rounds).map(|r| read_run(&work.join(format!("rounds/{side}/r{r}"))).map_err(|e| e.to_string())).collect::<Result<Vec<_>>>()?;
    Ok(aggregate_rounds(&runs))
}

// ------------------------------------------------------------------------------------------------
// Instruction counts

/// How this run counts instructions, for the report; Err says why it does not.
fn counter_description(opts: &Options) -> std::result::Result<String, String> {
    match opts.counter {
        CounterKind::None => Err("not counted (--counter none)".into()),
        CounterKind::Callgrind => match output(Command::new("valgrind").arg("--version")) {
            Ok(v) => Ok(format!(
                "{v} `--tool=callgrind --toggle-collect=fer_*`, {} calls per process, {} processes per side{}",
                opts.counter_reps,
                opts.counter_runs,
                opts.counter_filter.as_deref().map(|f| format!(", counter filter `{f}`")).unwrap_or_default()
            )),
            Err(e) => Err(format!("not counted: valgrind unavailable ({e})")),
        },
        CounterKind::Perf => {
            let probe = Command::new("perf").args(["stat", "-x,", "-e", "instructions:u", "true"]).stdin(Stdio::null()).output();
            match probe {
                Ok(o) if o.status.success() && !String::from_utf8_lossy(&o.stderr).contains("not supported") => Ok(format!(
                    "`perf stat -e instructions:u`, whole process minus a 0-call run, {} calls per process, {} processes per side",
                    opts.counter_reps, opts.counter_runs
                )),
                _ => Err("`perf stat -e instructions` is not supported on this machine; use --counter callgrind".into()),
            }
        }
    }
}

/// The counter scenarios the harness knows, narrowed by --counter-filter.
fn counter_scenarios(exe: &Path, filter: Option<&str>) -> Result<Vec<String>> {
    let list = output(Command::new(exe).arg("--list"))?;
    let re = filter.map(|f| regex::Regex::new(f).expect("checked when parsing"));
    Ok(list.lines().filter(|s| re.as_ref().is_none_or(|re| re.is_match(s))).map(String::from).collect())
}

fn count_side(side: &Side, scenarios: &[String], opts: &Options, work: &Path, notes: &mut Vec<String>) -> BTreeMap<String, CountSample> {
    let mut out = BTreeMap::new();
    let Some(exe) = &side.counts_exe else {
        notes.push(format!("{}: the counting harness did not build; no instruction counts for this side", side.name));
        return out;
    };
    let dir = work.join(format!("counts/{}", side.name));
    let _ = fresh_dir(&dir);
    for scenario in scenarios {
        let slug: String = scenario.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
        let totals: Result<Vec<u64>> = (0..opts.counter_runs).map(|run| count_once(exe, scenario, opts, &dir.join(format!("{slug}.run{run}")))).collect();
        match totals {
            Ok(totals) => {
                out.insert(scenario.clone(), CountSample { reps: opts.counter_reps, totals });
            }
            Err(e) => notes.push(format!("{}: counting {scenario} failed: {e}", side.name)),
        }
    }
    out
}

/// One counted process: the instructions of `opts.counter_reps` calls of `scenario`. Its files
/// are `<stem>.callgrind` and `<stem>.log`.
fn count_once(exe: &Path, scenario: &str, opts: &Options, stem: &Path) -> Result<u64> {
    let reps = opts.counter_reps.to_string();
    match opts.counter {
        CounterKind::Perf => {
            let all = perf_instructions(exe, scenario, &reps)?;
            let setup = perf_instructions(exe, scenario, "0")?;
            Ok(all.saturating_sub(setup))
        }
        _ => {
            let out = PathBuf::from(format!("{}.callgrind", stem.display()));
            let mut cmd = Command::new("valgrind");
            cmd.args(["--tool=callgrind", "--toggle-collect=fer_*"]).arg(format!("--callgrind-out-file={}", out.display()));
            cmd.arg(exe).args([scenario, reps.as_str()]);
            run_logged(&mut cmd, Path::new(&format!("{}.log", stem.display())))?;
            let text = fs::read_to_string(&out).map_err(|e| format!("{}: {e}", out.display()))?;
            parse_callgrind_totals(&text).ok_or_else(|| format!("{}: no totals line", out.display()))
        }
    }
}

/// User-space instructions of one process under `perf stat` (CSV output on stderr).
fn perf_instructions(exe: &Path, scenario: &str, reps: &str) -> Result<u64> {
    let out = Command::new("perf")
        .args(["stat", "-x,", "-e", "instructions:u", "--"])
        .arg(exe)
        .args([scenario, reps])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    let err = String::from_utf8_lossy(&out.stderr);
    parse_perf_instructions(&err).ok_or_else(|| format!("perf stat gave no instruction count: {}", err.trim()))
}

/// The count from `perf stat -x,` CSV (`12345,,instructions:u,...`); None for `<not supported>`.
fn parse_perf_instructions(csv: &str) -> Option<u64> {
    csv.lines().find(|l| l.contains("instructions")).and_then(|l| l.split(',').next()).and_then(|n| n.trim().parse().ok())
}

// ------------------------------------------------------------------------------------------------
// Host

fn host_info(machine: Option<&str>) -> HostInfo {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo.lines().find_map(|l| l.strip_prefix("model name")).and_then(|l| l.split_once(':')).map(|(_, v)| v.trim().to_string()).unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    HostInfo {
        machine_name: machine.map(String::from).unwrap_or_else(|| machine_slug(&cpu, cores)),
        cpu,
        cores,
        kernel: output(Command::new("uname").arg("-srm")).unwrap_or_default(),
        rustc: output(Command::new("rustc").arg("--version").env("PATH", path_env())).unwrap_or_default(),
        load_before: loadavg(),
        load_after: String::new(),
    }
}

/// `AMD EPYC`, 2 -> `amd-epyc-2cpu`: the noise file's name.
fn machine_slug(cpu: &str, cores: usize) -> String {
    let words: Vec<String> = cpu.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_ascii_lowercase).collect();
    format!("{}-{cores}cpu", words.join("-"))
}

fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg").map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" ")).unwrap_or_default()
}

fn machine_of(host: &HostInfo) -> Machine {
    Machine { name: host.machine_name.clone(), cpu: host.cpu.clone(), cores: host.cores }
}

// ------------------------------------------------------------------------------------------------
// The run

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match parse_args(&args) {
        Ok(o) => o,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return;
        }
        Err(e) => {
            eprintln!("bench-compare: {e}\n\n{USAGE}");
            std::process::exit(2);
        }
    };
    match run(&opts, &args) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("bench-compare: {e}");
            std::process::exit(2);
        }
    }
}

/// Paths of this run, resolved against the repository root.
struct Paths {
    root: PathBuf,
    work: PathBuf,
    logs: PathBuf,
    report: PathBuf,
    noise: PathBuf,
    reference: PathBuf,
}

fn paths(opts: &Options, host: &HostInfo) -> Result<Paths> {
    let root = PathBuf::from(output(Command::new("git").args(["rev-parse", "--show-toplevel"]))?);
    let work = opts.work_dir.clone().unwrap_or_else(|| root.join("target/bench-compare"));
    check_work_dir(&root, &work)?;
    Ok(Paths {
        logs: work.join("logs"),
        report: opts.report.clone().unwrap_or_else(|| work.join("report.md")),
        noise: opts.noise.clone().unwrap_or_else(|| root.join(format!("benches/noise/{}.json", host.machine_name))),
        reference: opts.reference.clone().unwrap_or_else(|| root.join("benches/baseline/reference.json")),
        root,
        work,
    })
}

fn run(opts: &Options, args: &[String]) -> Result<i32> {
    let mut host = host_info(opts.machine.as_deref());
    let p = paths(opts, &host)?;
    let (base_rev, change_rev) = resolve_revisions(opts, &p)?;
    // A counter asked for but unavailable stops the run before minutes are spent measuring.
    let counter_source = counter_description(opts);
    if let (Err(why), true) = (&counter_source, opts.counter != CounterKind::None) {
        return Err(format!("{why} (or run with --counter none)"));
    }
    let noise = NoiseFile::load(&p.noise).map_err(|e| e.to_string())?;
    let reference = Reference::load(&p.reference).map_err(|e| e.to_string())?;
    let mut notes = Vec::new();
    if let Some(n) = noise.as_ref().filter(|n| n.machine.name != host.machine_name) {
        notes.push(format!("the noise file was measured on `{}`, this is `{}`", n.machine.name, host.machine_name));
    }
    for dir in ["logs", "rounds", "counts"] {
        fresh_dir(&p.work.join(dir))?;
    }
    eprintln!("bench-compare: base {}\nbench-compare: change {}", base_rev.label, change_rev.label);

    // Measure: build both sides, interleave the timing rounds, count; the worktrees go right after.
    let mut worktrees = Worktrees { root: p.root.clone(), paths: Vec::new(), keep: opts.keep_worktrees };
    let sides = [prepare_side("base", base_rev, opts, &p, &mut worktrees)?, prepare_side("change", change_rev, opts, &p, &mut worktrees)?];
    host.load_before = loadavg();
    run_rounds(&sides, opts, &p.work, &p.logs)?;
    let counts = match &counter_source {
        Ok(_) => count_both(&sides, opts, &p.work, &mut notes)?,
        Err(_) => [BTreeMap::new(), BTreeMap::new()],
    };
    host.load_after = loadavg();
    drop(worktrees);

    // Compare: every threshold from the noise file as it was before this run.
    let base = read_side(&p.work, "base", opts.rounds)?;
    let change = read_side(&p.work, "change", opts.rounds)?;
    let counter_cmp = compare_counts(&counts[0], &counts[1], noise.as_ref(), reference.as_ref());
    let mut rows = build_rows(&base, &change, |s| TIME_RULE.threshold(noise.as_ref().and_then(|n| n.spread(s))), &counter_cmp);
    sort_worst_first(&mut rows);

    let date = now_utc();
    let aa_noise = opts.aa.as_ref().map(|_| merged_noise(noise.clone(), &base, &change, &counts, opts, &host, &sides[0], &date));
    let meta = ReportMeta {
        aa: opts.aa.is_some(),
        date: date.clone(),
        command: format!("scripts/bench-compare {}", args.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" ")).trim_end().to_string(),
        base: sides[0].rev.label.clone(),
        change: sides[1].rev.label.clone(),
        rounds: opts.rounds,
        benches: opts.benches.clone(),
        filter: opts.filter.clone(),
        criterion_args: opts.criterion_args.clone(),
        noise_source: noise_source(noise.as_ref(), &p),
        counter_source: counter_source.clone().unwrap_or_else(|e| e),
        reference: reference.as_ref().map(|r| format!("`{}` pinned {} on `{}`", short(&r.revision), r.date, r.machine.name)),
        chart: Some(p.report.with_extension("svg").file_name().unwrap().to_string_lossy().into_owned()),
        aa_noise,
        notes,
    };
    let kind = if opts.aa.is_some() { "A/A" } else { "change vs base" };
    let title = format!("{kind}: {} vs {}, time delta per scenario", sides[1].rev.short_label, sides[0].rev.short_label);
    write_outputs(&p, &meta, &rows, &host, &title)?;

    if let Some((_, file)) = &meta.aa_noise {
        file.save(&p.noise).map_err(|e| e.to_string())?;
        eprintln!("bench-compare: wrote {}", p.noise.display());
    }
    if opts.pin_reference {
        pin_reference(&p, &sides[1], &host, &date, &change, &counts[1], opts, counter_source.unwrap_or_default())?;
    }
    Ok(exit_code(opts.gate, &rows))
}

/// BASE and CHANGE as commits: `--aa REV` twice, or the positional revisions with their defaults
/// (merge-base with main; the working tree).
fn resolve_revisions(opts: &Options, p: &Paths) -> Result<(Revision, Revision)> {
    if let Some(rev) = &opts.aa {
        return Ok((resolve(&p.root, rev)?, resolve(&p.root, rev)?));
    }
    let base = match &opts.base {
        Some(b) => resolve(&p.root, b)?,
        None => merge_base(&p.root)?,
    };
    let change = match opts.change.as_deref() {
        None | Some(WORKING_TREE) => snapshot_working_tree(&p.root, &p.work)?,
        Some(c) => resolve(&p.root, c)?,
    };
    Ok((base, change))
}

/// Checks `rev` out in `<work>/wt-<name>` and builds it into `<work>/target-<name>`.
fn prepare_side(name: &'static str, rev: Revision, opts: &Options, p: &Paths, worktrees: &mut Worktrees) -> Result<Side> {
    let worktree = p.work.join(format!("wt-{name}"));
    worktrees.add(&worktree, &rev.commit)?;
    let target = p.work.join(format!("target-{name}"));
    let mut side = Side { name, rev, worktree, target, benches: Vec::new(), counts_exe: None };
    build_side(&mut side, opts, &p.logs)?;
    Ok(side)
}

/// A/A mode: the noise this run measured, and the noise file with it merged in (written after
/// the report, so the run itself is judged by the file as it was).
#[allow(clippy::too_many_arguments)]
fn merged_noise(
    previous: Option<NoiseFile>,
    base: &BTreeMap<String, SideResult>,
    change: &BTreeMap<String, SideResult>,
    counts: &[BTreeMap<String, CountSample>; 2],
    opts: &Options,
    host: &HostInfo,
    side: &Side,
    date: &str,
) -> (BTreeMap<String, NoiseSample>, NoiseFile) {
    let measured = measure_aa(base, change);
    let run = NoiseRun {
        date: date.to_string(),
        revision: side.rev.commit.clone(),
        rounds: opts.rounds,
        benches: opts.benches.clone(),
        filter: opts.filter.clone(),
        criterion_args: opts.criterion_args.clone(),
    };
    let mut file = previous.filter(|_| !opts.aa_fresh).unwrap_or_else(|| NoiseFile::new(machine_of(host)));
    file.machine = machine_of(host);
    file.record(run, measured.clone(), aa_count_spread(counts));
    (measured, file)
}

/// Counts on both sides (the scenario list comes from whichever side built the harness).
fn count_both(sides: &[Side], opts: &Options, work: &Path, notes: &mut Vec<String>) -> Result<[BTreeMap<String, CountSample>; 2]> {
    let Some(exe) = sides.iter().find_map(|s| s.counts_exe.as_ref()) else {
        notes.push("the counting harness built on neither side: no instruction counts".into());
        return Ok([BTreeMap::new(), BTreeMap::new()]);
    };
    let scenarios = counter_scenarios(exe, opts.counter_filter.as_deref())?;
    let started = Instant::now();
    let base = count_side(&sides[0], &scenarios, opts, work, notes);
    let change = count_side(&sides[1], &scenarios, opts, work, notes);
    eprintln!("bench-compare: counted {} scenario(s) on both sides in {:.0} s", scenarios.len(), started.elapsed().as_secs_f64());
    Ok([base, change])
}

/// The count spread per scenario over all processes of both sides of an A/A run.
fn aa_count_spread(counts: &[BTreeMap<String, CountSample>; 2]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (name, b) in &counts[0] {
        if let Some(c) = counts[1].get(name).filter(|c| c.reps == b.reps) {
            let all = CountSample { reps: b.reps, totals: b.totals.iter().chain(&c.totals).copied().collect() };
            out.insert(name.clone(), all.spread());
        }
    }
    out
}

fn noise_source(noise: Option<&NoiseFile>, p: &Paths) -> String {
    let shown = p.noise.strip_prefix(&p.root).unwrap_or(&p.noise).display().to_string();
    match noise.and_then(|n| Some((n, n.runs.last()?))) {
        Some((n, last)) => format!(
            "`{shown}`, {} A/A run(s) on `{}`, latest {} at `{}`, {} scenario(s)",
            n.runs.len(),
            n.machine.name,
            last.date,
            short(&last.revision),
            n.scenarios.len()
        ),
        None => format!("none yet: `{shown}` does not exist, so every scenario uses the default"),
    }
}

fn write_outputs(p: &Paths, meta: &ReportMeta, rows: &[ferrite_benches::compare::rows::Row], host: &HostInfo, title: &str) -> Result<()> {
    let md = render_markdown(meta, rows, host);
    let svg_path = p.report.with_extension("svg");
    if let Some(dir) = p.report.parent() {
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    fs::write(&p.report, &md).map_err(|e| format!("{}: {e}", p.report.display()))?;
    fs::write(&svg_path, svg::render(rows, title)).map_err(|e| format!("{}: {e}", svg_path.display()))?;
    eprintln!("bench-compare: {}\nbench-compare: wrote {} and {}", headline(rows), p.report.display(), svg_path.display());
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn pin_reference(
    p: &Paths,
    side: &Side,
    host: &HostInfo,
    date: &str,
    timings: &BTreeMap<String, SideResult>,
    counts: &BTreeMap<String, CountSample>,
    opts: &Options,
    counter: String,
) -> Result<()> {
    let reference = Reference {
        revision: side.rev.commit.clone(),
        date: date.to_string(),
        machine: machine_of(host),
        counter,
        reps: opts.counter_reps,
        instructions: counts.iter().map(|(k, v)| (k.clone(), v.per_call())).collect(),
        timings_ns: timings.iter().filter_map(|(k, v)| Some((k.clone(), v.median()?))).collect(),
        note: format!("pinned with --pin-reference from {}; timings are for information only", side.rev.label),
    };
    reference.save(&p.reference).map_err(|e| e.to_string())?;
    eprintln!("bench-compare: pinned {} to {}", p.reference.display(), short(&side.rev.commit));
    Ok(())
}

/// Quotes an argument for the report's command line when the shell would need it.
fn shell_quote(a: &str) -> String {
    if !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:@,".contains(c)) {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        split_args(s)
    }

    #[test]
    fn defaults_and_revisions() {
        let o = parse_args(&args("")).unwrap();
        assert_eq!((o.base, o.change, o.rounds, o.gate), (None, None, 3, false));
        assert_eq!(o.benches, ["kernels", "sampling"]);
        assert_eq!(o.criterion_args.join(" "), DEFAULT_CRITERION_ARGS);
        let o = parse_args(&args("main HEAD --gate --rounds 5 --bench kernels --filter add/")).unwrap();
        assert_eq!((o.base.as_deref(), o.change.as_deref(), o.rounds, o.gate), (Some("main"), Some("HEAD"), 5, true));
        assert_eq!((o.benches, o.filter.as_deref()), (vec!["kernels".to_string()], Some("add/")));
    }

    #[test]
    fn bad_arguments_are_refused() {
        assert!(parse_args(&args("--rounds 0")).is_err());
        assert!(parse_args(&args("--aa HEAD main")).is_err());
        assert!(parse_args(&args("a b c")).is_err());
        assert!(parse_args(&args("--filter (")).is_err());
        assert!(parse_args(&args("--counter dtrace")).is_err());
        assert_eq!(parse_args(&args("--help")).unwrap_err(), "");
    }

    #[test]
    fn machine_names_and_quoting() {
        assert_eq!(machine_slug("AMD EPYC", 2), "amd-epyc-2cpu");
        assert_eq!(machine_slug("Intel(R) Xeon(R) Platinum 8480+", 16), "intel-r-xeon-r-platinum-8480-16cpu");
        assert_eq!(shell_quote("add/|logit"), "'add/|logit'");
        assert_eq!(shell_quote("--rounds"), "--rounds");
    }

    #[test]
    fn perf_csv_is_parsed_and_unsupported_is_none() {
        assert_eq!(parse_perf_instructions("12815675,,instructions:u,1003,100.00,,\n"), Some(12_815_675));
        assert_eq!(parse_perf_instructions("<not supported>,,instructions:u,0,100.00,,\n"), None);
    }

    #[test]
    fn artifacts_pick_executables_by_target() {
        let out = r#"{"reason":"compiler-artifact","target":{"kind":["bench"],"name":"kernels","src_path":"/w/benches/benches/kernels.rs"},"executable":"/t/kernels-1"}
{"reason":"compiler-artifact","target":{"kind":["lib"],"name":"ferrite_benches","src_path":"/w/benches/src/lib.rs"},"executable":null}
{"reason":"build-finished","success":true}"#;
        let got = artifacts(out, |t| t["kind"].as_array().is_some_and(|k| k.iter().any(|k| k == "bench")));
        assert_eq!(got, vec![("kernels".to_string(), PathBuf::from("/t/kernels-1"))]);
    }
}
