from django.conf import settings
from django.core.management.base import BaseCommand

from memory_app.embedders import get_embedder
from memory_app.embeddings import ensure_vector_index, messages_embed, records_embed
from memory_app.models import MessageEmbedding, Record
from memory_app.selectors.records import pending_messages, pending_records


class Command(BaseCommand):
    help = (
        "Embeddings: `prepare` (load the configured embedder once: exports the local model to ONNX if it never "
        "was; scripts/up runs it), `status` (how many rows are in the configured embedder's space), `index` (create "
        "its HNSW indexes), `reembed` (queue every record not yet in that space; --now embeds here instead)."
    )
    # The system checks load every URL, view and admin module and the API schema: `check` and `migrate` run them.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["prepare", "status", "index", "reembed"])
        parser.add_argument("--now", action="store_true", help="reembed in this process, not through Celery")
        parser.add_argument("--batch", type=int, default=256)

    def handle(self, *args, action, now=False, batch=256, **options):
        embedder = get_embedder()
        self.stdout.write(f"Embedder: {embedder.label} — key {embedder.key}, {embedder.dimensions} dimensions.")
        if action == "prepare":
            seconds = embedder.load()
            status = embedder.status()
            where = getattr(embedder, "export_folder", None)
            self.stdout.write(
                f"Loaded in {seconds:.1f} s"
                + (f" (runtime {status['runtime']}, export in {where})" if status.get("runtime") else "")
                + "."
            )
        elif action == "status":
            valid = Record.objects.filter(valid=True)
            done = valid.filter(embedding_key=embedder.key).count()
            self.stdout.write(f"Records: {done} of {valid.count()} valid records embedded with this key.")
            messages = MessageEmbedding.objects.filter(embedding_key=embedder.key).count()
            self.stdout.write(f"Messages: {messages} embedded with this key.")
        elif action == "index":
            ensure_vector_index(embedder)
            self.stdout.write("HNSW indexes are in place.")
        else:
            ids = pending_records(embedder=embedder, limit=10_000_000)
            message_ids = (
                pending_messages(embedder=embedder, limit=100_000_000, within=None)
                if settings.ACE_EMBED_MESSAGES
                else []
            )
            if now:
                done = sum(
                    records_embed(record_ids=ids[start : start + batch], embedder=embedder)
                    for start in range(0, len(ids), batch)
                )
                done_messages = sum(
                    messages_embed(message_ids=message_ids[start : start + batch], embedder=embedder)
                    for start in range(0, len(message_ids), batch)
                )
                self.stdout.write(f"Embedded {done} records and {done_messages} messages.")
            else:
                from memory_app.tasks import embed_messages, embed_records

                for start in range(0, len(ids), batch):
                    embed_records.delay([str(pk) for pk in ids[start : start + batch]])
                for start in range(0, len(message_ids), batch):
                    embed_messages.delay([str(pk) for pk in message_ids[start : start + batch]])
                self.stdout.write(f"Queued {len(ids)} records and {len(message_ids)} messages in batches of {batch}.")
