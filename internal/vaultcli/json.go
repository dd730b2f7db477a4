package vaultcli

import (
	"encoding/json"
	"time"

	"github.com/agentvault/agentvault/vault"
)

// itemJSON is one item as `vault list --json` and `vault show --json`
// print it: metadata only, never a secret. Field names are part of the
// CLI's contract (scripts read them), so they only ever gain fields; the
// object of the item's kind is set and the others are null.
type itemJSON struct {
	ID       string        `json:"id"`
	Kind     string        `json:"kind"`
	Label    string        `json:"label"`
	Owner    string        `json:"owner"`
	Created  time.Time     `json:"created"`
	Summary  string        `json:"summary"`
	Card     *cardJSON     `json:"card"`
	Login    *loginJSON    `json:"login"`
	Identity *identityJSON `json:"identity"`
	Address  *addressJSON  `json:"address"`
}

type cardJSON struct {
	Brand       string   `json:"brand"`
	Last4       string   `json:"last4"`
	ExpiryMonth int      `json:"expiryMonth"`
	ExpiryYear  int      `json:"expiryYear"`
	Holder      string   `json:"holder"`
	AnySite     bool     `json:"anySite"`
	Sites       []string `json:"sites"`
	StoredCVV   bool     `json:"storedCVV"` // false: the owner types it per purchase
}

type loginJSON struct {
	Site     string `json:"site"`
	Website  string `json:"website"`
	Email    string `json:"email"`
	Username string `json:"username"`
	HasTOTP  bool   `json:"hasTOTP"`
}

type identityJSON struct {
	Name  string `json:"name"`
	Email string `json:"email"`
	Phone string `json:"phone"`
}

type addressJSON struct {
	Name       string `json:"name"`
	Line1      string `json:"line1"`
	Line2      string `json:"line2"`
	City       string `json:"city"`
	Region     string `json:"region"`
	PostalCode string `json:"postalCode"`
	Country    string `json:"country"`
}

func itemOf(it vault.Item) itemJSON {
	j := itemJSON{ID: it.ID, Kind: string(it.Kind), Label: it.Label, Owner: it.Owner, Created: it.Created.UTC(), Summary: mask(it)}
	switch {
	case it.Card != nil:
		cm := it.Card
		sites := append([]string{}, cm.Sites...)
		j.Card = &cardJSON{Brand: cm.Brand, Last4: cm.Last4, ExpiryMonth: cm.ExpiryMonth, ExpiryYear: cm.ExpiryYear, Holder: cm.HolderName,
			AnySite: cm.AnySite, Sites: sites, StoredCVV: it.Has(vault.FieldCVV)}
	case it.Login != nil:
		lm := it.Login
		j.Login = &loginJSON{Site: lm.Site, Website: lm.Website, Email: lm.Email, Username: lm.Username, HasTOTP: lm.HasTOTP}
	case it.Identity != nil:
		j.Identity = &identityJSON{Name: it.Identity.Name, Email: it.Identity.Email, Phone: it.Identity.Phone}
	case it.Address != nil:
		a := it.Address
		j.Address = &addressJSON{Name: a.Name, Line1: a.Line1, Line2: a.Line2, City: a.City, Region: a.Region, PostalCode: a.PostalCode, Country: a.Country}
	}
	return j
}

// printJSON writes v as indented JSON on stdout.
func (c *cli) printJSON(v any) int {
	enc := json.NewEncoder(c.env.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return exitError
	}
	return exitOK
}
