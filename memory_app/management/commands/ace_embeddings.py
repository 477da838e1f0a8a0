from django.core.management.base import BaseCommand

from memory_app.embedders import get_embedder
from memory_app.embeddings import ensure_vector_index, pending_records, records_embed
from memory_app.models import MessageEmbedding, Record


class Command(BaseCommand):
    help = (
        "Embeddings: `status` (how many rows are in the configured embedder's space), `index` (create its HNSW "
        "indexes), `reembed` (queue every record not yet in that space; --now embeds here instead)."
    )

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["status", "index", "reembed"])
        parser.add_argument("--now", action="store_true", help="reembed in this process, not through Celery")
        parser.add_argument("--batch", type=int, default=256)

    def handle(self, *args, action, now=False, batch=256, **options):
        embedder = get_embedder()
        self.stdout.write(f"Embedder: {embedder.label} — key {embedder.key}, {embedder.dimensions} dimensions.")
        if action == "status":
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
            if now:
                done = sum(
                    records_embed(record_ids=ids[start : start + batch], embedder=embedder)
                    for start in range(0, len(ids), batch)
                )
                self.stdout.write(f"Embedded {done} records.")
            else:
                from memory_app.tasks import embed_records

                for start in range(0, len(ids), batch):
                    embed_records.delay([str(pk) for pk in ids[start : start + batch]])
                self.stdout.write(f"Queued {len(ids)} records in batches of {batch}.")
