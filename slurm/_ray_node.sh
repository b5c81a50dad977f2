# shellcheck shell=bash
# One node's part of the job's Ray cluster, run inside the container by _act_job.sh through srun:
#   bash slurm/_ray_node.sh head | worker
# It follows NeMo-RL v0.7.0's ray.sub (tag commit 81aa43dd):
# - `ulimit -Sn 65535` where the hard limit allows (Ray's large-cluster best practice), else a warning;
# - every `ray start` is preceded by `ray stop` and the removal of /tmp/ray/session_* (a half-started or
#   requeued attempt leaves a session behind that makes the next start fail);
# - the head starts without --block and is retried a few times; only once `ray start --head` has returned
#   (its GCS listens) does it write $LOG_DIR/STARTED_RAY_HEAD; then it keeps the step alive;
# - workers wait for that file (or $LOG_DIR/ENDED), then retry `ray start --address ... --block` every 10 s
#   (`ray start --address` fails until the GCS listens);
# - ray.sub's ports: GCS 9900, client server 9901 and worker gRPC 10002-11000 (below the OS ephemeral range
#   32768-60999), node manager / object manager / runtime-env agent / dashboard agent / metrics on 5300x and
#   52365 (+1 on the head);
# - RAY_ENABLE_UV_RUN_RUNTIME_ENV=0 (NeMo-RL builds its worker venvs itself);
# - each node advertises its GPUs as the custom resource worker_units, and the head reads their total from
#   `ray status` the way ray.sub counts "actors online";
# - with DRIVER_COMMAND_FILE set (the job's `nemo-act run`), the head runs it in its own step once all
#   NUM_ACTORS GPUs joined, and exits with its status (ray.sub's non-interactive driver).
# No `set -e` (as ray.sub says: the retry loops need failing commands to go on).
set -uo pipefail
role=${1:?usage: _ray_node.sh head|worker}
: "${LOG_DIR:?}" "${HEAD_IP:?}" "${GPUS_PER_NODE:?}"
RAY_PORT=${RAY_PORT:-9900}
RAY_CLIENT_SERVER_PORT=${RAY_CLIENT_SERVER_PORT:-9901}
NODE_MANAGER_PORT=${NODE_MANAGER_PORT:-53001}
OBJECT_MANAGER_PORT=${OBJECT_MANAGER_PORT:-53003}
RUNTIME_ENV_AGENT_PORT=${RUNTIME_ENV_AGENT_PORT:-53005}
DASHBOARD_AGENT_GRPC_PORT=${DASHBOARD_AGENT_GRPC_PORT:-53007}
DASHBOARD_AGENT_LISTEN_PORT=${DASHBOARD_AGENT_LISTEN_PORT:-52365}
METRICS_EXPORT_PORT=${METRICS_EXPORT_PORT:-53009}
MIN_WORKER_PORT=${MIN_WORKER_PORT:-10002}
MAX_WORKER_PORT=${MAX_WORKER_PORT:-11000}
HEAD_RETRIES=${HEAD_RETRIES:-3}
WORKER_RETRIES=${WORKER_RETRIES:-20}
RETRY_SECONDS=${RETRY_SECONDS:-10}
export RAY_ENABLE_UV_RUN_RUNTIME_ENV=0 RAY_USAGE_STATS_ENABLED=0

if [[ ! -f $LOG_DIR/.shared_fs_canary ]]; then  # ray.sub:457-463 and 672-675
  echo "[ERROR] $LOG_DIR/.shared_fs_canary is not visible on $(hostname): LOG_DIR (RUNS_ROOT) must be on a" \
    "filesystem every node of the job shares" >&2
  if [[ $role == head ]]; then touch "$LOG_DIR/ENDED" 2>/dev/null || true; fi
  exit 1
fi

hard=$(ulimit -Hn)
if [[ $hard == unlimited ]] || (( hard > 65535 )); then
  ulimit -Sn 65535
elif (( hard < 65535 )); then
  echo "[WARNING] cannot raise the open-file limit to 65535 (hard limit $hard): Ray may fail under load" >&2
fi

reset_ray() {
  ray stop >/dev/null 2>&1 || true
  rm -rf /tmp/ray/session_* 2>/dev/null || true
}

# ports of a node; the head takes the next one up (both may share the first node)
node_ports() {
  local plus=$1
  echo "--node-manager-port=$((NODE_MANAGER_PORT + plus)) --object-manager-port=$((OBJECT_MANAGER_PORT + plus))" \
    "--runtime-env-agent-port=$((RUNTIME_ENV_AGENT_PORT + plus))" \
    "--dashboard-agent-grpc-port=$((DASHBOARD_AGENT_GRPC_PORT + plus))" \
    "--dashboard-agent-listen-port=$((DASHBOARD_AGENT_LISTEN_PORT + plus))" \
    "--metrics-export-port=$((METRICS_EXPORT_PORT + plus))" \
    "--min-worker-port=$MIN_WORKER_PORT --max-worker-port=$MAX_WORKER_PORT"
}
resources="{\"worker_units\": $GPUS_PER_NODE}"

joined_units() {  # GPUs (worker_units) of the nodes that have joined, from `ray status` as ray.sub reads it
  local units
  units=$(ray status 2>/dev/null | grep worker_units | awk -F'[/. ]+' '{print $4}')
  echo "${units:-0}"
}

# ray.sub:598-650: with a driver command, the head waits until all NUM_ACTORS GPUs joined, then runs the
# driver inside its own step (no overlapping step beside the head's: what such a step sees of the node's
# GPUs depends on the Slurm version), with RAY_ADDRESS set, its output in $LOG_DIR/pipeline.log.
run_driver() {
  local want=${NUM_ACTORS:?} deadline=$((SECONDS + ${RAY_WAIT_SECONDS:-1800})) units
  while true; do
    units=$(joined_units)
    echo "[INFO] GPUs in Ray: $units/$want"
    [[ $units == "$want" ]] && break
    if (( SECONDS > deadline )) || [[ -f $LOG_DIR/ENDED ]]; then
      echo "only $units of $want GPUs joined Ray" | tee "$LOG_DIR/RAY_FAILED" >&2
      return 1
    fi
    sleep "${COUNT_SECONDS:-5}"
  done
  touch "$LOG_DIR/DRIVER_STARTED"
  RAY_ADDRESS="$HEAD_IP:$RAY_PORT" bash "$DRIVER_COMMAND_FILE" > "$LOG_DIR/pipeline.log" 2>&1
}

if [[ $role == head ]]; then
  for ((attempt = 1; attempt <= HEAD_RETRIES; attempt++)); do
    reset_ray
    # shellcheck disable=SC2046  # node_ports prints separate flags
    if ray start --head --disable-usage-stats --include-dashboard=false --node-ip-address="$HEAD_IP" \
      --port="$RAY_PORT" --ray-client-server-port="$RAY_CLIENT_SERVER_PORT" --num-gpus="$GPUS_PER_NODE" \
      --resources="$resources" $(node_ports 1); then
      echo "[INFO] Ray head started (attempt $attempt/$HEAD_RETRIES)"
      touch "$LOG_DIR/STARTED_RAY_HEAD"
      if [[ -n ${DRIVER_COMMAND_FILE:-} ]]; then  # the job's driver runs here, in the head's own step
        run_driver
        status=$?
        touch "$LOG_DIR/ENDED"
        reset_ray
        exit "$status"
      fi
      while [[ ! -f $LOG_DIR/ENDED ]]; do sleep 5; done  # keep the step (and its raylet) alive
      reset_ray
      exit 0
    fi
    echo "[WARN] Ray head failed to start ($attempt/$HEAD_RETRIES); retrying in 5 s" >&2
    sleep 5
  done
  touch "$LOG_DIR/ENDED"
  exit 1
fi

if [[ $role == worker ]]; then
  until [[ -f $LOG_DIR/STARTED_RAY_HEAD ]]; do
    if [[ -f $LOG_DIR/ENDED ]]; then echo "[ERROR] the job ended before the Ray head started" >&2; exit 1; fi
    sleep 2
  done
  for ((attempt = 1; attempt <= WORKER_RETRIES; attempt++)); do
    [[ -f $LOG_DIR/ENDED ]] && exit 0
    reset_ray
    echo "[INFO] worker ${SLURM_PROCID:-?}: joining $HEAD_IP:$RAY_PORT (attempt $attempt/$WORKER_RETRIES)"
    # shellcheck disable=SC2046
    ray start --address="$HEAD_IP:$RAY_PORT" --disable-usage-stats --num-gpus="$GPUS_PER_NODE" \
      --resources="$resources" $(node_ports 0) --block
    [[ -f $LOG_DIR/ENDED ]] && exit 0
    echo "[WARN] worker ${SLURM_PROCID:-?}: ray start failed or ended ($attempt/$WORKER_RETRIES); retrying" >&2
    sleep "$RETRY_SECONDS"
  done
  touch "$LOG_DIR/ENDED"
  exit 1
fi
echo "usage: _ray_node.sh head|worker" >&2
exit 2
