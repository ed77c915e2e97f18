#!/usr/bin/env sh
# Run the kgc offline job through spark-submit.
#
#   deploy/spark/submit.sh audit   /data/kgc --out /reports/$(date +%F) [--upstream broker:9092]
#   deploy/spark/submit.sh audit   --bootstrap kafka-0:9092 --out /reports/$(date +%F) [--topic kgc-state]
#   deploy/spark/submit.sh compact /data/kgc-copy --out /data/kgc-compacted --verify
#
# SPARK_MASTER   where to run (default local[*]; e.g. spark://host:7077, k8s://https://..., yarn)
# PYSPARK_PYTHON the Python with kgc installed, on the driver and every executor
#                (default: the python3 on PATH; with a packed venv: ./environment/bin/python)
# SPARK_SUBMIT_ARGS extra spark-submit arguments, e.g. "--archives kgc-env.tar.gz#environment"
# KGC_SPARK_KAFKA_PACKAGE  with --bootstrap: Spark's Kafka source to fetch with --packages
#                (default: spark-sql-kafka-0-10_2.13 at the PySpark version kgc's Python has;
#                empty: none, the jars come with SPARK_SUBMIT_ARGS' --jars or the image)
set -eu
PYTHON="${PYSPARK_PYTHON:-$(command -v python3)}"
JOB="$("$PYTHON" -c 'import coordinator.offline.__main__ as job; print(job.__file__)')"
export PYSPARK_PYTHON="$PYTHON"
PACKAGES=""
case " $* " in
    *" --bootstrap"*)
        PACKAGES="${KGC_SPARK_KAFKA_PACKAGE-$("$PYTHON" -c 'from coordinator.offline.kafka_source import connector_coordinates; print(connector_coordinates())')}";;
esac
# Word splitting of SPARK_SUBMIT_ARGS is intended: it holds several arguments.
# shellcheck disable=SC2086
exec spark-submit \
    --master "${SPARK_MASTER:-local[*]}" \
    --name kgc-offline \
    --conf spark.ui.showConsoleProgress=false \
    --conf spark.log.level=WARN \
    ${PACKAGES:+--packages "$PACKAGES"} \
    ${SPARK_SUBMIT_ARGS:-} \
    "$JOB" "$@"
