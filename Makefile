# The two commands a newcomer needs: `make run` and `make test`. Both install what they need.
.PHONY: setup run test typecheck soak bench down

setup:
	@bash scripts/setup.sh

# Runs a local manager group and agents on loopback addresses.
run: setup
	npx kcm local up

down:
	npx kcm local down

test: setup
	npm test

typecheck: setup
	npm run typecheck

soak: setup
	npm run soak:raft

bench: setup
	npm run bench:raft-kv
