"""What an import reports: a result per file, the summary of the whole import (and its one line), an issue as a
line of text."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ingest_app.importers import ParseIssue
from sessions_app.schema import TOKEN_FIELDS

MAX_ISSUES = 200  # issues kept in a summary (all are counted)


@dataclass
class FileResult:
    path: str
    status: str  # imported | unchanged | refused | skipped (not a regular file, a link out of the tree)
    tool: str = ""
    session_id: str | None = None
    messages: int = 0
    lines_read: int = 0
    reason: str = ""
    streaming: int = 0  # responses stored whose last lines have not arrived yet (completed in place later)
    renamed_from: str = ""  # the path the file was imported under before it was renamed (see renames.py)

    def note_session(self, *, tool: str, session_id) -> None:
        """The tool the file was read as and the session its messages go to (an id, or None)."""
        self.tool, self.session_id = tool, None if session_id is None else str(session_id)

    def as_dict(self) -> dict:
        return {
            "path": self.path,
            "status": self.status,
            "tool": self.tool,
            "session": self.session_id,
            "messages": self.messages,
            "lines_read": self.lines_read,
            "reason": self.reason,
            "streaming": self.streaming,
            "renamed_from": self.renamed_from,
        }


@dataclass
class ImportSummary:
    files_seen: int = 0
    files_imported: int = 0
    files_unchanged: int = 0
    files_refused: int = 0
    files_skipped: int = 0
    files_renamed: int = 0
    sessions_created: int = 0
    messages: int = 0
    requests: int = 0
    lines_read: int = 0
    bytes_read: int = 0
    tokens: Counter = field(default_factory=Counter)
    issues: list[ParseIssue] = field(default_factory=list)
    issues_total: int = 0
    lines_skipped: int = 0  # lines left out of files read (corrupt JSON, not an object…): error issues of a line
    files: list[FileResult] = field(default_factory=list)

    def add_issues(self, issues: list[ParseIssue]) -> None:
        self.issues_total += len(issues)
        self.lines_skipped += sum(issue.level == "error" and issue.line > 0 for issue in issues)
        room = MAX_ISSUES - len(self.issues)
        if room > 0:
            self.issues.extend(issues[:room])

    def add_refused(self, path: str, reason: str) -> None:
        self.add_issues([ParseIssue(path, 0, reason)])
        self.add_file(FileResult(path, "refused", reason=reason))

    def add_skipped(self, path: str, reason: str) -> None:
        """A file found that is not read at all (a FIFO, a link out of the tree): a warning, not a refusal."""
        self.add_issues([ParseIssue(path, 0, f"skipped: {reason}", "warning")])
        self.add_file(FileResult(path, "skipped", reason=reason))

    def add_file(self, result: FileResult) -> None:
        self.files_seen += 1
        self.files.append(result)
        self.files_renamed += bool(result.renamed_from)
        if result.status == "imported":
            self.files_imported += 1
        elif result.status == "unchanged":
            self.files_unchanged += 1
        elif result.status == "skipped":
            self.files_skipped += 1
        else:
            self.files_refused += 1

    @property
    def streaming(self) -> int:
        """Responses stored whose last lines have not arrived yet (a live session's newest answer): counted
        as far as they are written, and completed in place when the rest arrives."""
        return sum(result.streaming for result in self.files)

    def line(self) -> str:
        """One parseable line: `imported 8 files (3 unchanged, 1 refused): 2 new sessions, 1,234 messages, …`;
        files recognised as renamed ones already imported are named in the parentheses (`, 1 renamed`), so are
        files skipped unread (`, 1 skipped`: a FIFO, a link out of the tree), and, when there are any, the
        responses still streaming follow."""
        renamed = f", {self.files_renamed:,} renamed" if self.files_renamed else ""
        renamed += f", {self.files_skipped:,} skipped" if self.files_skipped else ""
        line = (
            f"imported {self.files_imported:,} files ({self.files_unchanged:,} unchanged, "
            f"{self.files_refused:,} refused{renamed}): {self.sessions_created:,} new sessions, "
            f"{self.messages:,} messages, "
            f"{self.requests:,} requests, {self.tokens['total_tokens']:,} tokens, {self.issues_total:,} issues"
        )
        streaming = self.streaming
        if streaming:
            responses = "response" if streaming == 1 else "responses"
            line += f"; {streaming:,} {responses} still streaming (stored; completed when their last lines arrive)"
        return line

    def as_dict(self, *, path_name=str) -> dict:
        """JSON-ready; `path_name` turns a server path into what the caller should see."""
        return {
            "summary": self.line(),
            "files_seen": self.files_seen,
            "files_imported": self.files_imported,
            "files_unchanged": self.files_unchanged,
            "files_refused": self.files_refused,
            "files_skipped": self.files_skipped,
            "files_renamed": self.files_renamed,
            "sessions_created": self.sessions_created,
            "messages": self.messages,
            "requests": self.requests,
            **{name: self.tokens[name] for name in TOKEN_FIELDS},
            "lines_read": self.lines_read,
            "streaming": self.streaming,
            "issues_total": self.issues_total,
            "issues": [
                {"path": path_name(i.path), "line": i.line, "level": i.level, "message": i.message} for i in self.issues
            ],
            "files": [
                {
                    **f.as_dict(),
                    "path": path_name(f.path),
                    "renamed_from": path_name(f.renamed_from) if f.renamed_from else "",
                }
                for f in self.files
            ],
        }


def format_issue(issue: ParseIssue, *, path_name=str) -> str:
    return f"{path_name(issue.path)}:{issue.line}: {issue.level}: {issue.message}"
