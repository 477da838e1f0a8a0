"""The admin kit: building blocks for any app's Django admin, big tables first.

`display` (numbers, badges, JSON, links, ids), `mixins` (read-only admins, big-table changelists that never count
or load what they do not show, search by id), `paginator` (`EstimatedCountPaginator`, no `COUNT(*)`) and `filters`
(a date range, choices from a small table, an object's id, set or not set). Their templates are under
`platform_kit/templates/admin/platform_kit/`. It imports no app.
"""
