// Package scheduler is the scheduler loop of a leasewrap started with
// --schedule: it registers the job's schedule, claims each scheduled time
// exactly once across the instances of the job (the claims table decides
// which one runs it), records the times nobody ran as missed or skipped,
// runs the times --catch-up owes and the runs leasewrap trigger requests,
// and stands by while the job runs on another schedule or the database
// cannot be reached. It owns the loop's decisions and its log lines; the
// command it runs under each lease, and the exit status each way the loop
// ends maps to, are the main command's (Host, Run's errors).
package scheduler
