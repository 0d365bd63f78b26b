# The synthetic big repository the big-repository benches share (sourced by
# big_repo.sh and pool_big_repo.sh, with $root set): FILES files at the tip
# and COMMITS commits of history (synth_repo.py, through git fast-import),
# made once per size under target/bench-repos/.

# Prints the path of the repository of $1 files and $2 commits, made if
# missing.
big_repo_origin() {
    local origin=$root/target/bench-repos/big-$1-$2
    if [ ! -f "$origin/.complete" ]; then
        rm -rf "$origin"
        git init -q -b main "$origin"
        echo "synthesising $1 files, $2 commits into $origin" >&2
        python3 "$root/host/benches/synth_repo.py" "$1" "$2" \
            | git -C "$origin" fast-import --quiet --done
        git -C "$origin" checkout -q -f main
        touch "$origin/.complete"
    fi
    echo "$origin"
}
