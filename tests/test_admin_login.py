"""The admin login has a brute-force limit (django-axes): after ACE_LOGIN_FAILURE_LIMIT wrong passwords for
one username from one address, even the right password is refused until the cool-off ends; a success before
then resets the count. The API's bearer keys are not affected."""

from axes.models import AccessAttempt
from django.urls import reverse

LOGIN = reverse("admin:login")


def post_login(client, password, username="auditor"):
    return client.post(LOGIN, {"username": username, "password": password, "next": "/admin/"})


def test_after_the_limit_even_the_right_password_is_refused(client, auditor, settings):
    assert settings.AXES_FAILURE_LIMIT == 5
    statuses = [post_login(client, "wrong").status_code for _ in range(5)]
    assert statuses == [200, 200, 200, 200, 429]  # the form again with its error, then locked at the limit
    locked = post_login(client, "right-password")
    assert locked.status_code == 429
    assert "_auth_user_id" not in client.session
    assert AccessAttempt.objects.get(username="auditor").failures_since_start == 6  # the locked try counts too


def test_a_success_before_the_limit_resets_the_count(client, auditor):
    for _ in range(4):
        post_login(client, "wrong")
    assert post_login(client, "right-password").status_code == 302  # logged in
    client.logout()
    for _ in range(4):
        post_login(client, "wrong")
    assert post_login(client, "right-password").status_code == 302


def test_another_username_is_not_locked_by_someone_elses_failures(client, auditor, django_user_model):
    django_user_model.objects.create_superuser("second", "second@example.com", "other-password")
    for _ in range(6):
        post_login(client, "wrong")
    assert post_login(client, "other-password", username="second").status_code == 302


def test_the_api_keys_are_not_throttled(client, auditor, api, session):
    for _ in range(6):
        post_login(client, "wrong")
    assert api.get(f"/api/v1/sessions/{session.pk}/").status_code == 200
