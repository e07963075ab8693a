package simulate

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// percent writes a share as a percentage with two decimals.
func percent(share float64) string { return fmt.Sprintf("%.2f%%", share*100) }

// stops writes slowed/challenged/blocked.
func stops(slowed, challenged, blocked int64) string {
	return fmt.Sprintf("%d/%d/%d", slowed, challenged, blocked)
}

// WriteTable writes r for people: what was run, then per scenario a row
// for the rules as a whole, one per deciding rule, one per way in of the
// owner, then what each scenario's attacker does.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "rules: %s (hash %s); %d users (population ×%g), attack ×%g; each scenario a simulated day on the embedded store\n", r.Rules, r.RulesHash, r.Users, r.Population, r.Attack)
	b.WriteString("guesses went ahead: allowed, or challenged and solved; stopped: slowed/challenged/blocked; logins: the legitimate users' (or the owner's) share slowed, challenged, blocked, never got in\n\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tROW\tGUESSES\tWENT AHEAD\tMAX PER ACCOUNT\tACCOUNTS REACHED\tCOMPROMISED\tSTOPPED\tLOGINS\tSLOWED\tCHALLENGED\tBLOCKED\tFAILED")
	for _, s := range r.Scenarios {
		a, u := &s.Attacker, &s.Users
		fmt.Fprintf(tw, "%s\tall rules\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%s\t%s\t%s\t%s\n", s.Scenario, a.Guesses, a.Allowed, a.MaxPerAccount, a.AccountsReached, a.AccountsCompromised,
			stops(a.Slowed, a.Challenged, a.Blocked), u.Logins, percent(u.SlowedShare), percent(u.ChallengedShare), percent(u.BlockedShare), percent(u.FailedShare))
		for _, o := range s.Owner {
			fmt.Fprintf(tw, "%s\towner: %s\t\t\t\t\t\t\t%d\t%s\t%s\t%s\t%s\n", s.Scenario, o.Way, o.Logins, percent(o.SlowedShare), percent(o.ChallengedShare), percent(o.BlockedShare), percent(o.FailedShare))
		}
		for _, rf := range s.Rules {
			st, ru := &rf.Attacker, &rf.Users
			fmt.Fprintf(tw, "%s\t%s\t\t\t\t\t\t%s\t\t%s\t%s\t%s\t%s\n", s.Scenario, rf.Rule, stops(st.Slowed, st.Challenged, st.Blocked),
				percent(ru.SlowedShare), percent(ru.ChallengedShare), percent(ru.BlockedShare), percent(ru.FailedShare))
			for _, o := range rf.Owner {
				if o.Slowed+o.Challenged+o.Blocked == 0 {
					continue
				}
				fmt.Fprintf(tw, "%s\t%s, owner: %s\t\t\t\t\t\t\t\t%s\t%s\t%s\t%s\n", s.Scenario, rf.Rule, o.Way, percent(o.SlowedShare), percent(o.ChallengedShare), percent(o.BlockedShare), percent(o.FailedShare))
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("\n")
	for _, s := range r.Scenarios {
		fmt.Fprintf(&b, "%s: %s\n", s.Scenario, s.What)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
