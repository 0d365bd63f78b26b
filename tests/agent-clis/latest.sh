#!/usr/bin/env bash
# Re-runs the real-CLI suite (tests/real_agents.rs) against the newest
# published version of each agent CLI instead of the pinned lockfile, and
# prints which agent providers still pass. The CLIs move every week: run
# this before bumping tests/agent-clis/package-lock.json.
#
#   tests/agent-clis/latest.sh            # every agent
#   tests/agent-clis/latest.sh codex pi   # some
#
# As root, the runs are the non-root test user's, as in CI
# (SANDDUNE_TEST_NON_ROOT_USER, tests/images/non-root-user.sh).
set -uo pipefail
cd "$(dirname "$0")/../.."

# agent provider, its test module, its npm package
agents=(
    "claude-code claude_code @anthropic-ai/claude-code"
    "codex codex @openai/codex"
    "opencode opencode opencode-ai"
    "pi pi @mariozechner/pi-coding-agent"
    "copilot copilot @github/copilot"
    "gemini gemini @google/gemini-cli"
    "qwen-code qwen_code @qwen-code/qwen-code"
)

wanted=("$@")
export SANDDUNE_AGENT_VERSIONS=latest
cargo test -p sanddune --test real_agents --no-run -q || exit 1

results=()
status=0
for row in "${agents[@]}"; do
    read -r agent module package <<<"$row"
    if [ ${#wanted[@]} -gt 0 ] && ! printf '%s\n' "${wanted[@]}" | grep -qx "$agent"; then
        continue
    fi
    pinned=$(node -e "console.log(require('./tests/agent-clis/package.json').dependencies['$package'])")
    latest=$(npm view "$package" version 2>/dev/null || echo "?")
    log=$(mktemp)
    if cargo test -p sanddune --test real_agents -q -- "$module::" >"$log" 2>&1; then
        verdict=pass
    else
        verdict=FAIL
        status=1
    fi
    summary=$(grep -E '^test result:' "$log" | tail -1 | sed 's/^test result: //')
    results+=("$(printf '%-12s %-10s %-10s %-5s %s' "$agent" "$pinned" "$latest" "$verdict" "$summary")")
    if [ "$verdict" = FAIL ]; then
        grep -E '^(---- |thread .* panicked)' "$log" | head -20 | sed "s/^/    $agent: /" >&2
    fi
    rm -f "$log"
done

printf '%-12s %-10s %-10s %-5s %s\n' agent pinned latest ok tests
printf '%s\n' "${results[@]}"
exit $status
