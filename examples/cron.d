# leasewrap in /etc/cron.d/leasewrap: a system crontab, so each line names
# the user the job runs as (here "report") between the schedule and the
# command. Install the same file on every host; each job runs on exactly one.
#
# cron runs lines with PATH=/usr/bin:/bin; the full paths below make that
# irrelevant. --id "$(hostname)" names the host in the lease, the logs,
# `leasewrap status` and `history` (without it each run gets a new random
# id). The password belongs in ~report/.pgpass, not in this file.
LEASEWRAP_DATABASE_URL=postgres://report@db.internal:5432/app
LEASEWRAP_LOG_FORMAT=json

0 2 * * * report /usr/bin/leasewrap --id "$(hostname)" --job nightly_report --hold-for 10m -- /opt/report/run >>/var/log/leasewrap/nightly_report.log 2>&1
