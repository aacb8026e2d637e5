"""Gold answers of Spider 2.0 tasks: result CSVs (one `<id>.csv`, or variants `<id>_a.csv`, …),
the evaluation config (`condition_cols`, `ignore_order` per task), and gold SQL files."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from flexsql.errors import ConfigError
from flexsql.evals.scoring import GoldTable, read_csv_frame

if TYPE_CHECKING:
    import pandas as pd


class EvalConfig(BaseModel):
    condition_cols: Any = None
    ignore_order: bool = True


class GoldStore:
    """Finds gold CSVs under `gold_dir` (its `exec_result/` folder, or the folder itself), the eval
    config (`eval_config`, else a `*eval*.jsonl` next to the CSVs), and gold SQL (`sql/<id>.sql`)."""

    def __init__(self, gold_dir: Path | None = None, eval_config: Path | None = None) -> None:
        self.gold_dir = Path(gold_dir) if gold_dir else None
        self.csv_dir: Path | None = None
        self.sql_dir: Path | None = None
        if self.gold_dir is not None:
            if not self.gold_dir.is_dir():
                raise ConfigError(
                    f"--gold {self.gold_dir} is not a folder; give the folder holding exec_result/ "
                    "(or the gold CSVs themselves)"
                )
            sub = self.gold_dir / "exec_result"
            self.csv_dir = sub if sub.is_dir() else self.gold_dir
            sql = self.gold_dir / "sql"
            self.sql_dir = sql if sql.is_dir() else None
        self.config_path = Path(eval_config) if eval_config else self._find_config()
        self.configs: dict[str, EvalConfig] = {}
        if self.config_path is not None:
            self.configs = load_eval_config(self.config_path)
        self._listing: dict[str, list[str]] | None = None

    def _find_config(self) -> Path | None:
        if self.gold_dir is None:
            return None
        for folder in (self.gold_dir, self.gold_dir.parent):
            found = sorted(p for p in folder.glob("*.jsonl") if "eval" in p.name.lower())
            if found:
                return found[0]
        return None

    def _files(self) -> dict[str, list[str]]:
        """CSV names grouped by the task id they belong to."""
        if self._listing is None:
            listing: dict[str, list[str]] = {}
            if self.csv_dir is not None:
                for path in self.csv_dir.iterdir():
                    if path.suffix.lower() != ".csv":
                        continue
                    match = re.fullmatch(r"(.+?)(_[a-z])?", path.stem)
                    if match:
                        listing.setdefault(path.stem, []).append(path.name)
                        if match.group(2):
                            listing.setdefault(match.group(1), []).append(path.name)
            self._listing = listing
        return self._listing

    def csv_paths(self, instance_id: str) -> list[Path]:
        """`<id>.csv` alone when it exists, else the variants `<id>_<letter>.csv`, sorted."""
        if self.csv_dir is None:
            return []
        names = self._files().get(instance_id, [])
        plain = f"{instance_id}.csv"
        if plain in names:
            return [self.csv_dir / plain]
        variants = sorted(n for n in names if re.fullmatch(re.escape(instance_id) + r"_[a-z]\.csv", n))
        return [self.csv_dir / n for n in variants]

    def tables(self, instance_id: str) -> list[GoldTable]:
        return [GoldTable(name=p.stem, frame=_read_gold(str(p))) for p in self.csv_paths(instance_id)]

    def config(self, instance_id: str) -> EvalConfig:
        return self.configs.get(instance_id, EvalConfig())

    def sql(self, instance_id: str) -> str | None:
        if self.sql_dir is None:
            return None
        path = self.sql_dir / f"{instance_id}.sql"
        return path.read_text(encoding="utf-8") if path.is_file() else None

    @property
    def has_csvs(self) -> bool:
        return self.csv_dir is not None


@lru_cache(maxsize=512)
def _read_gold(path: str) -> pd.DataFrame:
    return read_csv_frame(path)


def load_eval_config(path: Path) -> dict[str, EvalConfig]:
    if not Path(path).is_file():
        raise ConfigError(f"--eval-config {path} not found; give the spider2*_eval.jsonl file")
    configs: dict[str, EvalConfig] = {}
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            configs[str(item["instance_id"])] = EvalConfig(
                condition_cols=item.get("condition_cols"), ignore_order=bool(item.get("ignore_order", True))
            )
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path}:{n}: not an eval-config line with instance_id ({exc})") from None
    return configs
