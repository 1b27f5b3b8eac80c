"""OCI images on a worker: references, the pull plan, the content-addressed store, the puller."""
