#!/usr/bin/env bash
# Fetch Spark's Kafka connector (spark-sql-kafka-0-10) and its runtime dependencies from Maven
# Central into .cache/spark-kafka/<pyspark version>/jars (git-ignored); print that directory on
# the last line. Idempotent: a complete cache is left alone.
#
#   tools/spark-kafka/fetch.sh [PYSPARK_VERSION]   (default: the version of the importable pyspark)
#
# The connector of the same version as pyspark is taken when Maven Central has it; otherwise the
# version pinned in pom.xml, with a warning: a connector a minor version behind runs with this
# benchmark's plain batch write, but is not the one Spark ships with.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
python="${PYTHON:-python3}"
version="${1:-$("$python" -c 'import pyspark; print(pyspark.__version__)')}"
dest="$root/.cache/spark-kafka/$version/jars"
if [ -f "$dest/.complete" ]; then
    echo "$dest"
    exit 0
fi
fetch() {
    rm -rf "$dest"
    mkdir -p "$dest"
    mvn -q -B -s "$here/settings.xml" -f "$here/pom.xml" dependency:copy-dependencies \
        "$@" -DoutputDirectory="$dest" -DincludeScope=runtime >&2
}
if ! fetch -Dspark.kafka.version="$version" >/dev/null 2>&1; then
    pinned="$(sed -n 's:.*<spark.kafka.version>\(.*\)</spark.kafka.version>.*:\1:p' "$here/pom.xml")"
    echo "WARNING: spark-sql-kafka-0-10 $version is not on Maven Central; using $pinned (pom.xml)" >&2
    fetch
fi
touch "$dest/.complete"
echo "$(cd "$dest" && ls spark-sql-kafka-*.jar), $(ls "$dest" | wc -l) jars" >&2
echo "$dest"
