# shellcheck shell=bash
# Body of every slurm/act_*.sub job (sourced; the .sub file sets RECIPE_STEM and the #SBATCH shape).
#
# 1. reads the one env file (slurm/cluster.env: container, mounts, paths; see cluster.env.example);
# 2. brings up Ray across the job's nodes the way NeMo-RL's ray.sub does: one `ray start --head` on the
#    first node, `ray start --address` on the others, all inside the pinned NeMo-RL container
#    (pyxis/enroot; a named container per job, so the setup step's install is seen by later steps);
# 3. runs `nemo-act run <recipe>` on the head node: experts -> ACT pairs (vLLM) -> ACT -> IL -> RL
#    (each stage a NeMo-RL job exported to HF through tools/convert) -> held-out selection -> env eval,
#    with every log, checkpoint and result under one run dir;
# 4. on a requeue (time limit: USR1 10 min before the end, or `scontrol requeue`) the same command
#    skips the finished stages and resumes the unfinished one from its last NeMo-RL checkpoint.
#
# NEMO_ACT_DRY_RUN=1 prints every command instead of running it (scontrol is still asked for the
# node names).

set -euo pipefail
: "${RECIPE_STEM:?set by the slurm/act_*.sub file that sources this one}"

REPO=${NEMO_ACT_REPO:-${SLURM_SUBMIT_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}}
ENV_FILE=${NEMO_ACT_ENV_FILE:-$REPO/slurm/cluster.env}
DRY_RUN=${NEMO_ACT_DRY_RUN:-0}

if [[ -f "$ENV_FILE" ]]; then
  set -a
  # shellcheck source=/dev/null
  source "$ENV_FILE"
  set +a
elif [[ "$DRY_RUN" != 1 ]]; then
  echo "error: $ENV_FILE not found: copy slurm/cluster.env.example to slurm/cluster.env and fill it in" >&2
  exit 2
fi

PIN_FILE=$REPO/conf/engine/_nemo_rl_pin.yaml
CONTAINER=${CONTAINER:-$(sed -n 's/^nemo_rl_container: *//p' "$PIN_FILE")}
MOUNTS=${MOUNTS:-$REPO:$REPO}
BENCHMARK=${NEMO_ACT_BENCHMARK:-alfworld}
PRECISION=${NEMO_ACT_PRECISION:-bf16}
RAY_PORT=${RAY_PORT:-6379}
RAY_WAIT_SECONDS=${RAY_WAIT_SECONDS:-600}   # how long the nodes may take to join Ray
NEMO_RL_DIR=${NEMO_RL_DIR:-/opt/nemo-rl}
SETUP=${NEMO_ACT_SETUP:-python -m pip install --quiet --no-deps -e $REPO}
read -r -a OVERRIDES <<< "${NEMO_ACT_OVERRIDES:-}"

case "$PRECISION" in
  bf16) RECIPE=conf/recipes/$BENCHMARK/$RECIPE_STEM.yaml ;;
  fp8) RECIPE=conf/recipes/$BENCHMARK/$RECIPE_STEM-fp8.yaml ;;
  *) echo "error: NEMO_ACT_PRECISION=$PRECISION: use bf16 or fp8" >&2; exit 2 ;;
esac
if [[ ! -f "$REPO/$RECIPE" ]]; then
  echo "error: no recipe $RECIPE (NEMO_ACT_BENCHMARK=$BENCHMARK: alfworld, webshop or scienceworld)" >&2
  exit 2
fi

RUN_NAME=$(basename "$RECIPE" .yaml)
RUN_DIR=${RUNS_ROOT:-$REPO/runs}/$BENCHMARK/$RUN_NAME
JOB_ID=${SLURM_JOB_ID:-dry-run}
LOG_DIR=$RUN_DIR/logs/job-$JOB_ID
GPUS_PER_NODE=${SLURM_GPUS_ON_NODE:-4}
mapfile -t NODES < <(scontrol show hostnames "${SLURM_JOB_NODELIST:?not inside a Slurm job (SLURM_JOB_NODELIST unset)}")
NUM_NODES=${#NODES[@]}
HEAD=${NODES[0]}

CONTAINER_ARGS=(
  --container-image="$CONTAINER"
  --container-mounts="$MOUNTS"
  --container-name="nemo-act-$JOB_ID"
  --container-workdir="$REPO"
  --no-container-mount-home
)
SRUN=(srun --overlap "--export=ALL,NEMO_RL_DIR=$NEMO_RL_DIR")

show() {  # print a command as a shell would re-read it
  printf '+'
  printf ' %q' "$@"
}

run() {  # print, then run unless dry
  show "$@"
  echo
  if [[ "$DRY_RUN" != 1 ]]; then "$@"; fi
}

run_bg() {  # print, then start in the background unless dry
  show "$@"
  echo " &"
  if [[ "$DRY_RUN" != 1 ]]; then "$@" & BG_PIDS+=($!); fi
}

BG_PIDS=()
cleanup() {
  for pid in "${BG_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'echo "time limit near: requeueing $JOB_ID"; run scontrol requeue "$JOB_ID"' USR1

echo "nemo-act: $RECIPE on $NUM_NODES node(s) x $GPUS_PER_NODE GPU(s), container $CONTAINER"
echo "nemo-act: run dir $RUN_DIR (logs $LOG_DIR)"
run mkdir -p "$LOG_DIR"

# every node: our package into the job's container (NeMo-RL, vLLM, Megatron come with the image)
run "${SRUN[@]}" --nodes="$NUM_NODES" --ntasks-per-node=1 "${CONTAINER_ARGS[@]}" \
  --output="$LOG_DIR/setup-%n.log" bash -c "$SETUP"

if [[ "$DRY_RUN" == 1 ]]; then
  HEAD_IP=$HEAD
  show "${SRUN[@]}" --nodes=1 --ntasks=1 -w "$HEAD" hostname --ip-address
  echo
else
  HEAD_IP=$("${SRUN[@]}" --nodes=1 --ntasks=1 -w "$HEAD" hostname --ip-address | awk '{print $1}')
fi

run_bg "${SRUN[@]}" --nodes=1 --ntasks=1 -w "$HEAD" "${CONTAINER_ARGS[@]}" --output="$LOG_DIR/ray-head.log" \
  ray start --head --node-ip-address="$HEAD_IP" --port="$RAY_PORT" --num-gpus="$GPUS_PER_NODE" \
  --include-dashboard=false --block
if (( NUM_NODES > 1 )); then
  run_bg "${SRUN[@]}" --nodes=$((NUM_NODES - 1)) --ntasks-per-node=1 --exclude="$HEAD" "${CONTAINER_ARGS[@]}" \
    --output="$LOG_DIR/ray-worker-%n.log" \
    ray start --address="$HEAD_IP:$RAY_PORT" --num-gpus="$GPUS_PER_NODE" --block
fi

# wait until every node has joined (NeMo-RL's init_ray then attaches to this cluster)
COUNT_NODES=(python -c "import ray; ray.init(address='auto', log_to_driver=False); print(sum(n['Alive'] for n in ray.nodes()))")
run "${SRUN[@]}" --nodes=1 --ntasks=1 -w "$HEAD" "${CONTAINER_ARGS[@]}" "${COUNT_NODES[@]}"
if [[ "$DRY_RUN" != 1 ]]; then
  waited=0
  while true; do
    alive=$("${SRUN[@]}" --nodes=1 --ntasks=1 -w "$HEAD" "${CONTAINER_ARGS[@]}" "${COUNT_NODES[@]}" 2>/dev/null | tail -n 1 || true)
    if [[ "$alive" == "$NUM_NODES" ]] || (( waited >= RAY_WAIT_SECONDS )); then break; fi
    sleep 5
    waited=$((waited + 5))
  done
  if [[ "${alive:-0}" != "$NUM_NODES" ]]; then
    echo "error: only ${alive:-0} of $NUM_NODES Ray nodes joined (see $LOG_DIR/ray-*.log)" >&2
    exit 1
  fi
fi

# the pipeline, on the head node: finished stages are skipped, an unfinished one resumes.
# It runs in the background so the USR1 trap (requeue) fires while it runs.
run_bg "${SRUN[@]}" --nodes=1 --ntasks=1 -w "$HEAD" "${CONTAINER_ARGS[@]}" --output="$LOG_DIR/pipeline.log" \
  python -m nemo_act.cli run "$RECIPE" --run-dir "$RUN_DIR" "${OVERRIDES[@]}"
if [[ "$DRY_RUN" != 1 ]]; then
  pipeline=${BG_PIDS[-1]}
  status=0
  while kill -0 "$pipeline" 2>/dev/null; do
    wait "$pipeline" && status=0 || status=$?  # a trap interrupts wait: loop while it still runs
  done
  if (( status != 0 )); then
    echo "error: the pipeline failed (exit $status); see $LOG_DIR/pipeline.log" >&2
    exit "$status"
  fi
fi
if [[ "$DRY_RUN" == 1 ]]; then
  echo "nemo-act: dry run, nothing was started"
else
  echo "nemo-act: done; results in $RUN_DIR (nemo-act report $RUN_DIR)"
fi
