# Thin aliases onto scripts/: CI and humans run the same scripts.
.PHONY: test check lint e2e bench up down

test:
	scripts/test

check:
	scripts/check

lint:
	scripts/lint

e2e:
	scripts/e2e

bench:
	scripts/bench-loop
	scripts/bench-tools
	scripts/bench-queue

# The images install only from build/wheelhouse (no registry inside the build): make it first.
up:
	scripts/wheelhouse
	docker compose up -d --build

down:
	docker compose down
