# syntax=docker/dockerfile:1
# The kubesched operator image: `kubesched run` (the Helm chart in helm/kubesched runs it).
#
#   docker build -t <registry>/kubesched:0.1.0 .
#
# Two stages: the first builds wheels for kubesched and its dependencies (all of them
# ship binary wheels for linux/amd64 and arm64: no compiler is needed, and none is
# installed); the second installs those wheels into a clean python:3.11-slim, then
# removes pip, setuptools and wheel, so nothing in the final image can build or fetch
# packages. It runs as UID/GID 65532 (non-root; the chart's securityContext matches)
# with a read-only root filesystem in mind: no .pyc writes, HOME on the /tmp emptyDir.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY operator ./operator
# the tested dependency set (constraints.txt, as CI installs it)
RUN pip wheel --constraint constraints.txt --wheel-dir /wheels .

FROM python:3.11-slim AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels kubesched \
    && pip uninstall --yes pip setuptools wheel \
    && kubesched version
USER 65532:65532
WORKDIR /tmp
EXPOSE 10251
ENTRYPOINT ["kubesched", "run"]
