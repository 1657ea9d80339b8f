#!/usr/bin/env bash
# Fetch the Apache Kafka jars pinned in tools/kafka/pom.xml from Maven Central into
# .cache/kafka/<version>/libs (git-ignored). Idempotent: a complete cache is left alone.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
version="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/pom.xml")"
dest="${AIOPRODUCER_KAFKA_LIBS:-$root/.cache/kafka/$version/libs}"
if [ -f "$dest/.complete" ]; then
    echo "Apache Kafka $version jars: $dest (cached)"
    exit 0
fi
rm -rf "$dest"
mkdir -p "$dest"
mvn -q -B -f "$here/pom.xml" dependency:copy-dependencies \
    -DoutputDirectory="$dest" -DincludeScope=runtime
# Kafka's own build leaves out the old reload4j binding that kafka-tools drags in; two SLF4J
# bindings on one class path would pick either at random.
rm -f "$dest"/slf4j-reload4j-*.jar "$dest"/reload4j-*.jar
touch "$dest/.complete"
echo "Apache Kafka $version jars: $dest ($(ls "$dest" | wc -l) files)"
