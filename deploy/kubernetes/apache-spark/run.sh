#!/usr/bin/env bash
# Run one Apache Spark process with Delta Lake from the directory deploy/spark/fetch.sh filled, in
# the foreground (for a supervisor, a container or a test fixture to stop). Nothing downloads.
#
#   deploy/spark/run.sh connect [--master local[2]|spark://HOST:PORT] [--port 15002] [--host 127.0.0.1] [--conf K=V]...
#                               (--host 0.0.0.0 listens everywhere and advertises this host's address)
#   deploy/spark/run.sh master  [--port 7077] [--host 127.0.0.1] [--webui-port 8090]
#   deploy/spark/run.sh worker  spark://HOST:PORT [--cores 1] [--memory 1g] [--host 127.0.0.1] [--webui-port 8091]
#
# `connect` is the Spark Connect server sharesync talks to (`spark.remote: sc://HOST:PORT`): the
# Delta extension and catalog are static settings, so they are given here, at start. A standalone
# cluster is a `master`, one or more `worker`s, and a `connect` whose --master is the master's URL.
# SHARESYNC_SPARK_HOME names the directory (default: .engines/spark beside deploy/).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
home=${SHARESYNC_SPARK_HOME:-$here/../../.engines/spark}
fail() { echo "deploy/spark/run.sh: $*" >&2; exit 2; }
[ -f "$home/.complete" ] || fail "no Spark in $home: run deploy/spark/fetch.sh first (or set SHARESYNC_SPARK_HOME)"
export SPARK_HOME="$home/spark"
# Spark's scripts read conf/ and write logs/ and work/ under SPARK_HOME unless told otherwise.
export SPARK_LOG_DIR=${SPARK_LOG_DIR:-${TMPDIR:-/tmp}/sharesync-spark-logs}
export SPARK_WORKER_DIR=${SPARK_WORKER_DIR:-${TMPDIR:-/tmp}/sharesync-spark-work}
role=${1:-}
[ -n "$role" ] || fail "usage: run.sh connect|master|worker [options] (see the header of this script)"
shift

host=127.0.0.1
# Spark binds its driver, block manager and worker ports to SPARK_LOCAL_IP: the --host given.
bind_to() { [ "$1" = 0.0.0.0 ] || export SPARK_LOCAL_IP=${SPARK_LOCAL_IP:-$1}; }
case "$role" in
  connect)
    master="local[2]"; port=15002; confs=()
    while [ $# -gt 0 ]; do
      case "$1" in
        --master) master=$2; shift 2 ;;
        --port) port=$2; shift 2 ;;
        --host) host=$2; shift 2 ;;
        --conf) confs+=(--conf "$2"); shift 2 ;;
        *) fail "connect: unknown option '$1'" ;;
      esac
    done
    advertise=$host
    [ "$host" != 0.0.0.0 ] || advertise=$(hostname -i | awk '{print $1}')
    jars=$(find "$home/jars" -name '*.jar' | sort | paste -sd, -)
    # Delta replays a table's log over 50 partitions and Spark shuffles over 200 by default: on a
    # local master that is hundreds of tiny tasks per statement (seconds each MERGE). A cluster
    # keeps Spark's defaults; either way a later --conf wins.
    sizing=()
    case "$master" in
      local*) sizing=(--conf spark.databricks.delta.snapshotPartitions=2 --conf spark.sql.shuffle.partitions=4) ;;
    esac
    bind_to "$host"
    exec "$SPARK_HOME/bin/spark-submit" \
      --class org.apache.spark.sql.connect.service.SparkConnectServer \
      --name sharesync-spark-connect \
      --master "$master" \
      --jars "$jars" \
      --conf spark.driver.host="$advertise" \
      --conf spark.driver.bindAddress="$host" \
      --conf spark.connect.grpc.binding.address="$host" \
      --conf spark.connect.grpc.binding.port="$port" \
      --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \
      --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \
      --conf spark.sql.session.timeZone=UTC \
      --conf spark.ui.enabled=false \
      "${sizing[@]}" "${confs[@]}"
    ;;
  master)
    port=7077; webui=8090
    while [ $# -gt 0 ]; do
      case "$1" in
        --port) port=$2; shift 2 ;;
        --host) host=$2; shift 2 ;;
        --webui-port) webui=$2; shift 2 ;;
        *) fail "master: unknown option '$1'" ;;
      esac
    done
    bind_to "$host"
    exec "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master \
      --host "$host" --port "$port" --webui-port "$webui"
    ;;
  worker)
    master=${1:-}; [ -n "$master" ] || fail "worker: give the master's URL (spark://HOST:PORT)"
    shift
    cores=1; memory=1g; webui=8091
    while [ $# -gt 0 ]; do
      case "$1" in
        --cores) cores=$2; shift 2 ;;
        --memory) memory=$2; shift 2 ;;
        --host) host=$2; shift 2 ;;
        --webui-port) webui=$2; shift 2 ;;
        *) fail "worker: unknown option '$1'" ;;
      esac
    done
    bind_to "$host"
    exec "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker \
      --host "$host" --cores "$cores" --memory "$memory" --webui-port "$webui" "$master"
    ;;
  *) fail "unknown role '$role' (connect, master or worker)" ;;
esac
