"""A condition's skill is a frozen input: digested into the lock and shipped by reference.

The skill directory is resolved against the manifest, must hold SKILL.md, is digested like a
fixture (so changing it after freezing is refused), and travels to workers through the
artifact store; a worker unpacks it into the run's own profile.
"""

from __future__ import annotations

from pathlib import Path

from evalq.artifacts import ArtifactStore
from evalq.digest import tree_digest
from evalq.errors import UserError
from evalq.fixtures.archive import pack_workspace, unpack_workspace


def resolve_skill(skill: str, manifest_path: Path, index: int) -> Path:
    path = (manifest_path.parent / skill).resolve()
    if not (path / "SKILL.md").is_file():
        raise UserError(f"skill '{skill}' has no SKILL.md at {path}", file=manifest_path,
                        field=f"conditions.{index}.skill",
                        fix="give a folder, relative to the manifest, that holds SKILL.md")
    return path


def skill_digests(skills: dict[str, Path]) -> dict[str, dict[str, str]]:
    """For the lock: condition name -> {name, digest}."""
    return {condition: {"name": path.name, "digest": tree_digest(path)}
            for condition, path in sorted(skills.items())}


def publish_skills(store: ArtifactStore, skills: dict[str, Path]) -> dict[str, dict[str, str]]:
    """condition -> {name, digest, ref}: what workers need to install the skill."""
    published = skill_digests(skills)
    for condition, path in skills.items():
        published[condition]["ref"] = store.put(pack_workspace(path))
    return published


def install_published_skill(store: ArtifactStore, entry: dict[str, str], into: Path) -> Path:
    """Unpack a published skill under `into` and check it against its digest."""
    target = into / entry["name"]
    unpack_workspace(store.get(entry["ref"]), target)
    if tree_digest(target) != entry["digest"]:
        from evalq.errors import InfrastructureError

        raise InfrastructureError(f"skill {entry['name']} does not match its digest")
    return target
