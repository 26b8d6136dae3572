#!/usr/bin/env bash
# Put Apache Spark 4.2 and the Delta Lake 4.4 jars into one local directory, once, so that no
# engine ever downloads anything when it starts (no --packages, no spark.jars.packages).
#
#   deploy/spark/fetch.sh [DIR]        DIR defaults to $SHARESYNC_SPARK_HOME or .engines/spark
#
# DIR/spark   Spark's distribution, from PyPI's `pyspark` wheel (its jars and bin/)
# DIR/jars    Delta Lake, its delta-kernel jars and S3A (hadoop-aws + the AWS SDK's S3 client), the
#             runtime closure of deploy/spark/pom.xml less every jar Spark already ships
#
# Idempotent: a finished DIR holds a stamp naming the versions and is left alone. Needs python3
# (with pip), mvn and java 17+; pip and Maven keep their own caches (~/.cache/pip, ~/.m2).
# The server's full `pyspark` goes into DIR, never into sharesync's environment, where
# `pyspark-client` owns the same package name.
set -euo pipefail

SPARK_VERSION=4.2.0
DELTA_VERSION=4.4.0
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-${SHARESYNC_SPARK_HOME:-$here/../../.engines/spark}}
stamp="spark-$SPARK_VERSION delta-$DELTA_VERSION $(sha256sum "$here/pom.xml" | cut -c1-12)"

fail() { echo "deploy/spark/fetch.sh: $*" >&2; exit 1; }
for tool in python3 mvn java; do
  command -v "$tool" >/dev/null || fail "'$tool' is not installed (needs python3 with pip, Maven and Java 17+)"
done
java_major=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
[ "${java_major:-0}" -ge 17 ] || fail "Spark $SPARK_VERSION needs Java 17 or later; 'java' is $java_major"

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ "$(cat "$dir/.complete" 2>/dev/null)" = "$stamp" ]; then
  echo "$dir"
  exit 0
fi
rm -rf "$dir/spark" "$dir/jars" "$dir/.complete" "$dir/.work"
mkdir -p "$dir/.work"

python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$dir/.work/py" "pyspark==$SPARK_VERSION"
mv "$dir/.work/py/pyspark" "$dir/spark"

artifact() { sed -E 's/-[0-9][0-9A-Za-z.+_-]*\.jar$//'; }  # name-1.2.3.jar -> name

mvn --batch-mode --quiet -f "$here/pom.xml" dependency:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$dir/.work/jars" -Ddelta.version="$DELTA_VERSION"
# One copy of each library on the classpath: Spark's own wins. RoaringBitmap's `shims` belongs to
# the 0.9 line Delta asks for; Spark's RoaringBitmap 1.x does without it.
ls "$dir/spark/jars" | artifact | sort -u > "$dir/.work/spark-artifacts"
echo shims >> "$dir/.work/spark-artifacts"
mkdir -p "$dir/jars"
for jar in "$dir/.work/jars"/*.jar; do
  name=$(basename "$jar" | artifact)
  grep -qxF "$name" "$dir/.work/spark-artifacts" || mv "$jar" "$dir/jars/"
done

rm -rf "$dir/.work"
echo "$stamp" > "$dir/.complete"
echo "$dir"
