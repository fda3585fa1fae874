# The explorer as a class server (`make serve`) in a container: a Hugging Face Space with the Docker SDK, a VM.
# Installs from the same requirements.txt as `make run`; README.md ("Hosting a class") says how to deploy it.
FROM python:3.11-slim

# Graphviz lays the block diagram out on the server (without it the browser draws it, more slowly).
RUN apt-get update && apt-get install -y --no-install-recommends graphviz \
    && rm -rf /var/lib/apt/lists/*

# Spaces run the container as user 1000; runs and measured peaks go to its home.
RUN useradd --create-home --uid 1000 explorer
WORKDIR /app

# The runtime requirements only (torch pinned there). PIP_EXTRA_INDEX_URL may name PyTorch's CPU-only wheel
# index for a smaller image on a machine without a GPU.
ARG PIP_EXTRA_INDEX_URL=
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt

COPY --chown=explorer . .
USER explorer
ENV PORT=7860 ADDRESS=0.0.0.0 EXPLORER_HOME=/home/explorer/.explorer
EXPOSE 7860
# What `make serve` runs (headless, no file watcher); EXPLORER_JOBS, EXPLORER_MAX_STEPS, ... set the limits.
CMD ["python", "-m", "app.serve"]
