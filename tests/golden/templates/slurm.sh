#!/bin/bash
# sopsim benchmark as a Slurm job array: 8 shards, at most 4 at once.
# Shard I runs the planned runs at positions k with k mod 8 = I into /shared/pd-bench/shard-I,
# resuming if it is run again. OPENAI_BASE_URL and OPENAI_API_KEY, when set where you
# submit, reach every task (sbatch exports the environment).
#
# Submit:  jobid=$(sbatch --parsable this-script.sh)
# Merge:   sbatch --dependency=afterok:$jobid --wrap "sopsim bench merge /shared/pd-bench /shared/pd-bench/shard-*"
#SBATCH --job-name=sopsim-bench
#SBATCH --array=0-7%4
#SBATCH --cpus-per-task=4
#SBATCH --output=/shared/pd-bench/slurm-%A_%a.log
set -euo pipefail
mkdir -p /shared/pd-bench
exec sopsim bench scenarios/prisoners_dilemma.json --seeds 1000 --jobs 4 --llm openai --out /shared/pd-bench/shard-$SLURM_ARRAY_TASK_ID --shard env --shards 8 --quiet
