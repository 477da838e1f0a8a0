// django-celery-beat's periodic task form: under the crontab field, say in words when the chosen crontab runs.
// (Upstream keeps this inline in its template; the admin's Content-Security-Policy runs files only.)
"use strict";
(function ($) {
  const readableCrontabs = JSON.parse($("#readable-crontabs").text());
  const help = $(".field-crontab .help");
  const originalHelp = help.html();
  $(".field-crontab_translation").hide();
  $(".field-crontab").change(function () {
    const translation = readableCrontabs[$("#id_crontab").val()];
    help.html(originalHelp).append($("<br>"), document.createTextNode("Translation: " + (translation || "")));
  });
})(django.jQuery);
