# shellcheck shell=bash
# Body of every slurm/act_*.sub job (sourced; the .sub file sets RECIPE_STEM and the #SBATCH shape).
#
# 1. reads the one env file (slurm/cluster.env: image, mounts, paths; see cluster.env.example);
# 2. preflight, in the container on the head node, before any Ray or GPU work: `nemo-act cluster-check`
#    (every model in the offline HF cache, every step's interpreter, the simulator's packages and programs);
#    the job stops there, naming what is missing;
# 3. brings up Ray across the job's nodes as NeMo-RL's ray.sub does (slurm/_ray_node.sh: ulimit, port
#    ranges, `ray stop` + session cleanup before every start, head retries, workers retry until the GCS
#    listens, STARTED_RAY_HEAD / ENDED files in the log dir), and waits until every node's GPUs joined;
# 4. runs `nemo-act run <recipe>` inside the Ray head's step (ray.sub's driver): experts -> ACT pairs (vLLM
#    engines on every GPU) -> ACT -> IL -> RL
#    (each stage a NeMo-RL job exported to HF) -> held-out selection -> env eval, under one run dir;
# 5. on a requeue (time limit: USR1 10 min before the end; a stage stopped at its save deadline, exit 75; or
#    `scontrol requeue`) the same command skips the finished stages and resumes the unfinished one from its last
#    NeMo-RL checkpoint.
#
# Nothing is installed at job time: the image (slurm/build_image.sub) has the JRE and the simulators, and
# our code reaches every venv of the image through PYTHONPATH (nemo_act/engines/nemo_rl/interpreters.py).
# NEMO_ACT_DRY_RUN=1 prints every command, then the pipeline's whole plan, and runs nothing.

: "${RECIPE_STEM:?set by the slurm/act_*.sub file that sources this one}"
# shellcheck source=slurm/_common.sh
source "${NEMO_ACT_REPO:-${SLURM_SUBMIT_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}}/slurm/_common.sh"

CONTAINER=$(pyxis_image "${CONTAINER:-$RELEASE_IMAGE}")  # the prepared image (build_image.sub) in cluster.env
BENCHMARK=${NEMO_ACT_BENCHMARK:-alfworld}
RAY_WAIT_SECONDS=${RAY_WAIT_SECONDS:-1800}   # how long the nodes may take to join Ray (ray.sub: 30 min)
NEMO_RL_DIR=${NEMO_RL_DIR:-/opt/nemo-rl}
read -r -a OVERRIDES <<< "${NEMO_ACT_OVERRIDES:-}"
RECIPE=$(recipe_for "$RECIPE_STEM")

RUN_NAME=$(basename "$RECIPE" .yaml)
RUN_DIR=${RUNS_ROOT:-$REPO/runs}/$BENCHMARK/$RUN_NAME
LOG_DIR=$RUN_DIR/logs/job-$JOB_ID
GPUS_PER_NODE=${SLURM_GPUS_ON_NODE:-4}

CONTAINER_ARGS=(
  --container-image="$CONTAINER"
  --container-mounts="$MOUNTS"
  --container-name="nemo-act-$JOB_ID"
  --container-workdir="$REPO"
  --no-container-mount-home
)
# What every step sees: our code on PYTHONPATH (no install), offline hub, the job's log dir and Ray ports.
export LOG_DIR GPUS_PER_NODE NEMO_RL_DIR HF_HUB_OFFLINE=1 PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
SRUN=(srun --overlap --export=ALL)

CHECKLIST=("${SRUN[@]}" --nodes=1 --ntasks=1 -w "$HEAD" "${CONTAINER_ARGS[@]}"
  python -m nemo_act.cli checklist "$RECIPE" --run-dir "$RUN_DIR" --log-dir "$LOG_DIR" "${OVERRIDES[@]}")
cleanup() {
  local status=$?
  if [[ "${NEMO_ACT_CHECKLIST:-0}" == 1 && "$DRY_RUN" != 1 ]]; then  # act_preflight.sub: pass/fail per step
    echo "nemo-act: checklist (exit $status)"
    "${CHECKLIST[@]}" || true
  fi
  if [[ "$DRY_RUN" != 1 ]]; then touch "$LOG_DIR/ENDED" 2>/dev/null || true; fi  # Ray nodes stop themselves
  for pid in "${BG_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
# The job is requeued once: at USR1 (the time limit near), or when the pipeline stopped a stage at its save deadline
# (`nemo-act run` exits STAGE_STOPPED, 75: the stage saved and stopped early; nemo_act/engines StageStopped).
STAGE_STOPPED=75
REQUEUED=0
requeue() {
  if (( REQUEUED )); then return 0; fi
  REQUEUED=1
  echo "nemo-act: $1: requeueing $JOB_ID; the unfinished stage resumes from its last checkpoint"
  run scontrol requeue "$JOB_ID"
}
trap 'requeue "time limit near"' USR1

echo "nemo-act: $RECIPE on $NUM_NODES node(s) x $GPUS_PER_NODE GPU(s), image $CONTAINER"
echo "nemo-act: run dir $RUN_DIR (logs $LOG_DIR)"
run mkdir -p "$LOG_DIR"
# a requeued job keeps its id and so its log dir: last run's Ray markers must not satisfy this run's waits
run rm -f "$LOG_DIR/STARTED_RAY_HEAD" "$LOG_DIR/ENDED"

# 1. preflight, before Ray: the layout (nemo-act plan: parallel sizes against the model and the GPUs, memory per
#    GPU), then models offline, interpreters, simulator (nemo_act/engines/nemo_rl/layout.py, preflight.py)
if ! run "${SRUN[@]}" --nodes=1 --ntasks=1 -w "$HEAD" "${CONTAINER_ARGS[@]}" --output="$LOG_DIR/plan.log" \
  python -m nemo_act.cli plan "$RECIPE" "${OVERRIDES[@]}"; then
  echo "error: the recipe's layout cannot run (see $LOG_DIR/plan.log); nothing was started" >&2
  exit 1
fi
if ! run "${SRUN[@]}" --nodes=1 --ntasks=1 -w "$HEAD" "${CONTAINER_ARGS[@]}" --output="$LOG_DIR/cluster-check.log" \
  python -m nemo_act.cli cluster-check "$RECIPE" --run-dir "$RUN_DIR" "${OVERRIDES[@]}"; then
  echo "error: preflight checks failed (see $LOG_DIR/cluster-check.log); nothing was started" >&2
  exit 1
fi

# LOG_DIR must be on a filesystem every node sees (ray.sub:185-188): each node's _ray_node.sh checks this
# canary first and stops at once, instead of waiting 30 min for marker files it can never see.
if [[ "$DRY_RUN" != 1 ]]; then echo "$JOB_ID" > "$LOG_DIR/.shared_fs_canary"; fi
# The job's end (Unix seconds) for NeMo-RL's last save before the requeue (engine.nemo_rl.save_deadline_margin_s):
# Slurm's SLURM_JOB_END_TIME where it sets one, else squeue's end time of this job.
JOB_END=${SLURM_JOB_END_TIME:-}
if [[ -z "$JOB_END" && "$DRY_RUN" != 1 ]]; then
  JOB_END=$(date -d "$(squeue -h -j "$JOB_ID" -o %e 2>/dev/null)" +%s 2>/dev/null || true)
fi
export NEMO_ACT_JOB_END=$JOB_END

# 2. Ray (slurm/_ray_node.sh follows ray.sub) and 3. the pipeline, as ray.sub runs its driver: inside the head's
# own step, once every node's GPUs joined (no overlapping step beside the head: what such a step sees of the
# head's GPUs depends on the Slurm version). Finished stages are skipped, an unfinished one resumes; its data
# steps attach to this Ray cluster (RAY_ADDRESS) and spread their engines over every GPU (generation.engines).
HEAD_IP=$(resolve_ipv4 "$HEAD")
echo "nemo-act: Ray head $HEAD at $HEAD_IP"
DRIVER=(python -m nemo_act.cli run "$RECIPE" --run-dir "$RUN_DIR" "${OVERRIDES[@]}")
export HEAD_IP NUM_ACTORS=$((NUM_NODES * GPUS_PER_NODE)) RAY_WAIT_SECONDS DRIVER_COMMAND_FILE="$LOG_DIR/driver_command.sh"
if [[ "$DRY_RUN" != 1 ]]; then
  rm -f "$LOG_DIR/DRIVER_STARTED" "$LOG_DIR/RAY_FAILED"
  { printf 'cd %q\nexec' "$REPO"; printf ' %q' "${DRIVER[@]}"; echo; } > "$DRIVER_COMMAND_FILE"
fi
run_bg "${SRUN[@]}" --nodes=1 --ntasks=1 -w "$HEAD" "${CONTAINER_ARGS[@]}" --output="$LOG_DIR/ray-head.log" \
  bash "$REPO/slurm/_ray_node.sh" head
HEAD_PID=""
if (( ${#BG_PIDS[@]} )); then HEAD_PID=${BG_PIDS[-1]}; fi
WORKERS_PID=""
if (( NUM_NODES > 1 )); then
  run_bg "${SRUN[@]}" --nodes=$((NUM_NODES - 1)) --ntasks-per-node=1 --exclude="$HEAD" "${CONTAINER_ARGS[@]}" \
    --output="$LOG_DIR/ray-worker-%n.log" bash "$REPO/slurm/_ray_node.sh" worker
  if (( ${#BG_PIDS[@]} )); then WORKERS_PID=${BG_PIDS[-1]}; fi
fi
show "${DRIVER[@]}"
echo "   # in the head's step ($LOG_DIR/driver_command.sh) once all $NUM_ACTORS GPUs joined; log: pipeline.log"

if [[ "$DRY_RUN" != 1 ]]; then
  announced=0
  while kill -0 "$HEAD_PID" 2>/dev/null; do  # ray.sub:894-909: a worker srun gone before the head ends the job
    if [[ -n "$WORKERS_PID" ]] && ! kill -0 "$WORKERS_PID" 2>/dev/null && [[ ! -f "$LOG_DIR/DRIVER_STARTED" ]]; then
      touch "$LOG_DIR/ENDED"
    fi
    if (( ! announced )) && [[ -f "$LOG_DIR/DRIVER_STARTED" ]]; then
      echo "nemo-act: GPUs in Ray: $NUM_ACTORS/$NUM_ACTORS; the pipeline runs in the head's step (log: $LOG_DIR/pipeline.log)"
      announced=1
    fi
    sleep 2 || true  # a trap (USR1) interrupts sleep: loop while the head still runs
  done
  status=0
  wait "$HEAD_PID" || status=$?
  if [[ ! -f "$LOG_DIR/DRIVER_STARTED" ]]; then
    why=$(cat "$LOG_DIR/RAY_FAILED" 2>/dev/null || echo "the Ray head did not start")
    echo "error: $why ($NUM_NODES nodes; see $LOG_DIR/ray-*.log); the pipeline did not start" >&2
    exit 1
  fi
  if (( status == STAGE_STOPPED )); then  # nothing was exported or marked complete: the requeued job resumes it
    requeue "a stage stopped at its save deadline (see $LOG_DIR/pipeline.log)"
    exit 0
  fi
  if (( status != 0 )); then
    echo "error: the pipeline failed (exit $status); see $LOG_DIR/pipeline.log" >&2
    exit "$status"
  fi
  echo "nemo-act: done; results in $RUN_DIR (nemo-act report $RUN_DIR)"
else
  # the pipeline's own plan: every step it would run, with its interpreter in the image, inputs and outputs
  PLAN_PYTHON=${NEMO_ACT_PLAN_PYTHON:-python3}
  echo "nemo-act: the pipeline's plan (printed by $PLAN_PYTHON here; in the job each step runs as listed):"
  if ! NRL_CONTAINER=1 "$PLAN_PYTHON" -m nemo_act.cli run "$REPO/$RECIPE" --run-dir "$RUN_DIR" "${OVERRIDES[@]}"; then
    echo "nemo-act: (no plan: $PLAN_PYTHON cannot import nemo_act; set NEMO_ACT_PLAN_PYTHON to one that can)"
  fi
  if [[ "${NEMO_ACT_CHECKLIST:-0}" == 1 ]]; then
    show "${CHECKLIST[@]}"
    echo "   # at the end, also after a failure"
  fi
  echo "nemo-act: dry run, nothing was started"
fi
