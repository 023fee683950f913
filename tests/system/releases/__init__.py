"""Earlier releases of ltx-pipeline, exported from the repository's history, and what the upgrade test reads (#49)."""
