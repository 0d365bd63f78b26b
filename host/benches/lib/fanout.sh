# What the workflow fan-out benches share (sourced by workflow_fanout.sh and
# k8s_cluster.sh): a repository scaffolded with the parallel-planner
# template, and a round of it at one --parallel measured for wall time, the
# driving process's peak memory and the branches landed.

# The sanddune binary to measure: $1, else target/release, else target/debug.
sanddune_bin() {
  local bin=${1:-} b
  if [ -z "$bin" ]; then
    for b in "$root/target/release/sanddune" "$root/target/debug/sanddune"; do
      [ -x "$b" ] && bin=$b && break
    done
  fi
  [ -x "${bin:-}" ] || { echo "build sanddune first (cargo build --release)" >&2; return 2; }
  realpath "$bin"
}

# $work/home as the agents' HOME, with the scripted agent of
# tests/fakes/workflow-claude as `claude` (0.05 s between its lines), the
# fake `gh` and a backlog of 16 issues; $work/repo for the repository.
fanout_home() {
  mkdir -p "$work/home/bin" "$work/repo"
  ln -s "$root/tests/fakes/workflow-claude" "$work/home/bin/claude"
  ln -s "$root/tests/fakes/gh" "$work/home/bin/gh"
  echo 0.05 > "$work/home/fake-sleep"
  python3 -c 'import json; print(json.dumps([{"id": str(i), "title": f"task {i}"} for i in range(1, 17)]))' \
    > "$work/home/issues.json"
  export HOME="$work/home" PATH="$work/home/bin:$PATH"
  export SANDDUNE_CACHE_DIR="$root/target/tmp/component-cache"
  # claude-code's env requirement, as its users have it; the fake ignores it.
  export ANTHROPIC_API_KEY=sk-ant-bench-fake
}

# In the current (empty) directory: a repository with one commit, and
# `sanddune init` of the parallel-planner template over github-issues (the
# fake gh reads $HOME/issues.json), not yet committed.
fanout_scaffold() {
  git init -q -b main
  echo "# bench" > README.md
  git add README.md
  git -c user.name=b -c user.email=b@b.invalid commit -q -m initial
  "$bin" init --agent claude-code --sandbox docker --backlog github-issues \
    --template parallel-planner --no-build > /dev/null
}

# Commits the scaffold with an identity for the agents' commits in
# .sanddune/.env; prints the commit every round starts from.
fanout_commit() {
  printf 'GIT_AUTHOR_NAME=a\nGIT_AUTHOR_EMAIL=a@a.invalid\nGIT_COMMITTER_NAME=a\nGIT_COMMITTER_EMAIL=a@a.invalid\n' > .sanddune/.env
  git add .sanddune
  git -c user.name=b -c user.email=b@b.invalid commit -q -m "sanddune init"
  git rev-parse HEAD
}

# One round from commit $1 at --parallel $2, the rest of the arguments going
# to `workflow run`: prints "WALL_SECONDS PEAK_RSS_KIB LANDED". The peak is
# the one sanddune process's (python's rusage of its child).
fanout_round() {
  local base=$1 n=$2
  shift 2
  git reset -q --hard "$base"
  git for-each-ref --format='%(refname:short)' 'refs/heads/sanddune/' | xargs -r git branch -q -D
  python3 - "$bin" "$n" "$work" "$@" <<'PY'
import json, resource, subprocess, sys, time
bin, n, work, *extra = sys.argv[1:]
start = time.monotonic()
with open(f"{work}/result.json", "w") as out, open(f"{work}/stderr.txt", "w") as err:
    code = subprocess.call([bin, "workflow", "run", "parallel-planner", "--parallel", n, "--json", *extra],
                           stdout=out, stderr=err)
wall = time.monotonic() - start
if code != 0:
    sys.stderr.write(open(f"{work}/stderr.txt").read())
    sys.exit(code)
merge = json.load(open(f"{work}/result.json"))["steps"][2]["merge"]
landed = sum(q["status"] == "landed" for q in merge)
print(f"{wall:.2f} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss} {landed}")
PY
}

# Prints the figures of round $2.. (what fanout_round printed) at
# --parallel $1.
fanout_print() {
  printf -- '--parallel %-2s  %6.2f s  peak RSS %5.1f MiB  (%s branches landed)\n' \
    "$1" "$2" "$(echo "$3 / 1024" | bc -l)" "$4"
}
