"""Prepare a WebShop checkout for a protocol: its product files in ``data/``, its search index built and checked.

``nemo-act webshop-setup --webshop-dir D --data DIR --protocol small|full`` does what WebShop's ``setup.sh`` does
after its downloads (princeton-nlp/WebShop @ 64fa2a5, ``setup.sh:40-57``), from product files the user already
has (``DIR``: ``../shared/benchmarks/webshop/data`` holds the 1,000-product set):

1. the protocol's files are copied into ``D/data/`` under the names WebShop reads (``web_agent_site/utils.py:
   9-16``); a missing one is refused by name before anything is written;
2. WebShop's own conversion, ``search_engine/convert_product_file_format.py``, writes the search documents (for
   the full catalog it is pointed at ``items_shuffle.json``, the file its README tells users to set by hand);
3. pyserini's Lucene indexer builds the index WebShop's engine opens for the protocol (``engine.py:195-207``:
   ``indexes_1k`` at 1,000 products, ``indexes`` for the full catalog), with the flags of ``run_indexing.sh``;
4. the index is opened with pyserini's ``LuceneSearcher`` and must hold one document per product.

It runs in this Python, which must have WebShop's packages (pyserini 0.17.0 with Java 17, spaCy, ...:
docs/benchmarks.md 'WebShop'); WebShop's scripts run as child processes in the checkout, as its setup runs them.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

FULL_FILES = ("items_shuffle.json", "items_ins_v2.json")  # the full catalog's products and attributes
SMALL_FILES = ("items_shuffle_1000.json", "items_ins_v2_1000.json")  # WebShop's utils.py defaults
HUMAN_FILE = "items_human_ins.json"  # the human instructions (utils.HUMAN_ATTR_PATH), either protocol
# protocol -> the files under the names WebShop reads (the same in --data and in the checkout's data/), products first
PROTOCOL_FILES = {"small": (*SMALL_FILES, HUMAN_FILE), "full": (*FULL_FILES, HUMAN_FILE)}
INDEX = {"small": ("resources_1k", "indexes_1k"), "full": ("resources", "indexes")}
# search_engine/run_indexing.sh: python -m pyserini.index.lucene ... (one call per index)
INDEX_FLAGS = ["--collection", "JsonCollection", "--generator", "DefaultLuceneDocumentGenerator", "--threads", "1",
               "--storePositions", "--storeDocvectors", "--storeRaw"]  # fmt: skip


class SetupError(RuntimeError):
    """A file or folder the preparation needs is missing or wrong (one line, naming it)."""


@dataclass(frozen=True)
class Prepared:
    """What a preparation made."""

    index: Path
    documents: int
    indexed: int


def _check_inputs(webshop_dir: Path, data: Path, protocol: str) -> list[tuple[Path, Path]]:
    """(source, destination) of every file, after checking all of them exist."""
    if not (webshop_dir / "web_agent_site").is_dir() or not (webshop_dir / "search_engine").is_dir():
        raise SetupError(f"--webshop-dir {webshop_dir}: not a WebShop checkout (no web_agent_site/ or search_engine/)")
    pairs = [(data / name, webshop_dir / "data" / name) for name in PROTOCOL_FILES[protocol]]
    missing = [str(src) for src, _ in pairs if not src.is_file()]
    if missing:
        raise SetupError(f"protocol {protocol} needs {', '.join(missing)} (not found; --data names their folder)")
    return pairs


def _run(cmd: list[str], cwd: Path, what: str, console: Console) -> None:
    """Run a step of WebShop's setup; its output goes to a log beside the index, its failure names the log."""
    log = cwd / f"nemo-act-{what}.log"
    with console.status(f"{what} ..."), log.open("w") as fh:
        done = subprocess.run(cmd, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT, env={**os.environ})
    if done.returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-15:])
        raise SetupError(f"{what} failed (exit {done.returncode}; {log}):\n{tail}")
    console.print(f"[green]done[/] {what} ({log.name})")


def prepare(webshop_dir: str | Path, data: str | Path, protocol: str, console: Console | None = None) -> Prepared:
    """Prepare ``webshop_dir`` for ``protocol`` from the product files in ``data`` (see the module docstring).

    Raises:
        SetupError: A missing file or a failed step, by name; an index that lacks products.
    """
    console = console or Console(stderr=True)
    webshop_dir, data = Path(webshop_dir).resolve(), Path(data).resolve()
    pairs = _check_inputs(webshop_dir, data, protocol)
    (webshop_dir / "data").mkdir(exist_ok=True)
    for src, dst in pairs:
        if not (dst.is_file() and filecmp.cmp(src, dst, shallow=False)):
            shutil.copyfile(src, dst)
    console.print(f"[green]done[/] {len(pairs)} product files in {webshop_dir / 'data'}")
    engine = webshop_dir / "search_engine"
    resources, index = INDEX[protocol]
    for folder in ("resources", "resources_100", "resources_1k", "resources_100k"):  # the script writes all four
        (engine / folder).mkdir(exist_ok=True)
    products = str(webshop_dir / "data" / PROTOCOL_FILES[protocol][0])
    convert = (  # WebShop's script, its product file named as its README says to set it (utils.DEFAULT_FILE_PATH)
        "import runpy, sys; sys.path.insert(0, '..'); import web_agent_site.utils as u; "
        f"u.DEFAULT_FILE_PATH = {products!r}; runpy.run_path('convert_product_file_format.py', run_name='__main__')"
    )
    _run([sys.executable, "-c", convert], engine, "convert_product_file_format", console)
    shutil.rmtree(engine / index, ignore_errors=True)
    _run([sys.executable, "-m", "pyserini.index.lucene", "--input", resources, "--index", index, *INDEX_FLAGS],
         engine, "pyserini_index", console)  # fmt: skip
    with (engine / resources / "documents.jsonl").open() as fh:
        documents = len({json.loads(line)["id"] for line in fh if line.strip()})
    indexed = _count(engine / index)
    if indexed != documents:
        raise SetupError(f"{engine / index}: {indexed} documents indexed, {documents} products converted")
    console.print(f"[green]done[/] {engine / index}: {indexed} products indexed, every one converted")
    return Prepared(index=engine / index, documents=documents, indexed=indexed)


def _count(index: Path) -> int:
    """Documents in a Lucene index, as WebShop's engine opens it (pyserini's ``LuceneSearcher``)."""
    code = "import sys; from pyserini.search.lucene import LuceneSearcher; print(LuceneSearcher(sys.argv[1]).num_docs)"
    done = subprocess.run([sys.executable, "-c", code, str(index)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SetupError(f"{index}: pyserini cannot open the index: {done.stderr.strip().splitlines()[-1:]}")
    return int(done.stdout.strip().splitlines()[-1])


def add_command(sub: argparse._SubParsersAction) -> None:
    """Add ``nemo-act webshop-setup`` to the CLI's subcommands (the WebShop adapter offers it: ``add_commands``)."""
    p = sub.add_parser("webshop-setup", help="prepare a WebShop checkout: product files, search index (checked)")
    p.add_argument("--webshop-dir", required=True, help="your WebShop checkout (princeton-nlp/WebShop)")
    p.add_argument("--data", required=True, help="folder with the protocol's product files")
    p.add_argument("--protocol", choices=["small", "full"], default="small", help="small: 1,000 products")
    p.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    """``nemo-act webshop-setup``: prepare the checkout and say what was indexed.

    Raises:
        ValueError: A file or folder the preparation needs is missing or wrong (the CLI prints it, exit 2).
    """
    try:
        done = prepare(args.webshop_dir, args.data, args.protocol)
    except SetupError as err:
        raise ValueError(str(err)) from err
    print(f"WebShop at {args.webshop_dir} ready for the {args.protocol} protocol: {done.indexed} products indexed")
    return 0
