# shellcheck shell=bash disable=SC2034  # sets variables for the job that sources it
# Shared by every slurm/*.sub job (sourced first): where the checkout is, the one env file, the pinned
# release image in pyxis' syntax, the refusal to run outside a job, and printing/dry-running commands.
# NEMO_ACT_DRY_RUN=1 prints every command instead of running it.
set -euo pipefail

REPO=${NEMO_ACT_REPO:-${SLURM_SUBMIT_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}}
ENV_FILE=${NEMO_ACT_ENV_FILE:-$REPO/slurm/cluster.env}
DRY_RUN=${NEMO_ACT_DRY_RUN:-0}

if [[ -z "${SLURM_JOB_NODELIST:-}" ]]; then
  echo "error: not inside a Slurm job (SLURM_JOB_NODELIST is unset): submit it with sbatch;" \
    "to see its commands here: NEMO_ACT_DRY_RUN=1 SLURM_JOB_NODELIST='node[1-4]' bash ${BASH_SOURCE[-1]}" >&2
  exit 2
fi

if [[ -f "$ENV_FILE" ]]; then
  set -a
  # shellcheck source=/dev/null
  source "$ENV_FILE"
  set +a
elif [[ "$DRY_RUN" != 1 ]]; then
  echo "error: $ENV_FILE not found: copy slurm/cluster.env.example to slurm/cluster.env and fill it in" >&2
  exit 2
fi

# A docker reference (registry/namespace/image:tag) -> pyxis/enroot's syntax (registry#namespace/image:tag):
# pyxis reads `--container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH`, and without the `#` enroot looks the
# whole name up on Docker Hub. Files (a squashfs from build_image.sub) pass unchanged.
pyxis_image() {
  local ref=$1 first
  if [[ $ref == /* || $ref == ./* || $ref == *.sqsh || $ref == *#* || $ref != */* ]]; then
    echo "$ref"
    return
  fi
  first=${ref%%/*}
  if [[ $first == *.* || $first == *:* || $first == localhost ]]; then echo "$first#${ref#*/}"; else echo "$ref"; fi
}

# the release image of the one NeMo-RL pin (conf/engine/_nemo_rl_pin.yaml), in pyxis' syntax
RELEASE_IMAGE=$(pyxis_image "$(sed -n 's/^nemo_rl_container: *//p' "$REPO/conf/engine/_nemo_rl_pin.yaml")")
MOUNTS=${MOUNTS:-$REPO:$REPO}
JOB_ID=${SLURM_JOB_ID:-dry-run}
mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
if (( ${#NODES[@]} == 0 )); then
  echo "error: scontrol found no nodes in SLURM_JOB_NODELIST=$SLURM_JOB_NODELIST" >&2
  exit 2
fi
NUM_NODES=${#NODES[@]}
HEAD=${NODES[0]}

# the recipe of NEMO_ACT_BENCHMARK / NEMO_ACT_PRECISION for a recipe stem, checked to exist
recipe_for() {
  local stem=$1 bench=${NEMO_ACT_BENCHMARK:-alfworld} precision=${NEMO_ACT_PRECISION:-bf16} path
  case "$precision" in
    bf16) path=conf/recipes/$bench/$stem.yaml ;;
    fp8) path=conf/recipes/$bench/$stem-fp8.yaml ;;
    *) echo "error: NEMO_ACT_PRECISION=$precision: use bf16 or fp8" >&2; return 2 ;;
  esac
  if [[ ! -f "$REPO/$path" ]]; then
    echo "error: no recipe $path (NEMO_ACT_BENCHMARK=$bench: alfworld, webshop or scienceworld)" >&2
    return 2
  fi
  echo "$path"
}

show() {  # print a command as a shell would re-read it
  printf '+'
  printf ' %q' "$@"
}

run() {  # print, then run unless dry
  show "$@"
  echo
  if [[ "$DRY_RUN" != 1 ]]; then "$@"; fi
}

BG_PIDS=()
run_bg() {  # print, then start in the background unless dry
  show "$@"
  echo " &"
  if [[ "$DRY_RUN" != 1 ]]; then "$@" & BG_PIDS+=($!); fi
}

# A node's address as NeMo-RL v0.7.0's ray.sub resolves node names on the batch host (ray.sub:274-314: `host`,
# then `getent`, ..., else the name itself), keeping the first IPv4 address that is not loopback: a node's
# /etc/hosts often maps its own name to 127.0.1.1 (Debian's default), and `hostname --ip-address` on the node
# may print that or an IPv6 address first, which the other nodes cannot reach Ray's GCS on.
resolve_ipv4() {
  local node=$1 ip
  ip=$({
    host "$node" 2>/dev/null | awk '/has address/ { print $4 }'
    getent ahostsv4 "$node" 2>/dev/null | awk '{ print $1 }'
  } | grep -v '^127\.' | head -n 1 || true)
  echo "${ip:-$node}"
}

