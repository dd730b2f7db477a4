package proxyd

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/botauth"
	"github.com/agentvault/agentvault/vault"
)

// botAuthCommands are `proxyd botauth ...`'s commands, as authz names
// them after "botauth ".
var botAuthCommands = []string{"status", "enable", "disable", "rotate"}

const botAuthUsage = `usage: proxyd botauth <command>

The agent's identity on the wire: proxyd signs requests to the sites you
choose (HTTP message signatures, Web Bot Auth; Visa TAP where you turn it on)
with a key sealed in the vault. The agent never holds the key.

  status                          the sites signed for, the keys published, the directory's origin
  enable HOST [--tap browse,pay]  sign requests to HOST (and its subdomains); --tap adds Visa TAP's
                                  browsing tag (requests without a card) and payment tag (requests
                                  carrying a card the proxy released)
  disable HOST                    stop signing for HOST (sites in bot_auth.sites are the config's)
  rotate                          a new key signs from now; the old one stays in the directory until
                                  every signature it made has expired

A running proxyd applies a change within a few seconds. Signing needs
bot_auth.directory in the config (dashboard, or a host:port).
`

// cmdBotAuth runs `proxyd botauth ...` over the configured store.
func cmdBotAuth(ctx context.Context, args []string, s *cliStore, stdout, stderr io.Writer) int {
	if len(args) == 0 || !slices.Contains(botAuthCommands, args[0]) {
		fmt.Fprint(stderr, botAuthUsage)
		if len(args) > 0 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help") {
			return 0
		}
		return 2
	}
	v, err := s.vault(ctx)
	if err != nil {
		return fail(stderr, err)
	}
	cfg := s.cfg.BotAuth
	switch args[0] {
	case "status":
		return botAuthStatus(ctx, v, cfg, stdout, stderr)
	case "rotate":
		now := time.Now()
		kr, err := rotateBotAuthKey(ctx, v, cfg.window(), now)
		if err != nil {
			return fail(stderr, err)
		}
		keys := kr.Keys()
		old := keys[len(keys)-2]
		fmt.Fprintf(stdout, "new key %s signs from now\nold key %s stays in the directory until %s (its last signatures expire by then)\n",
			kr.Active().ID(), old.ID(), old.Retire().Local().Format(time.RFC3339))
		return 0
	}
	fs := flag.NewFlagSet("botauth "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	tap := fs.String("tap", "", "Visa TAP uses for the site: browse, pay or browse,pay")
	host, rest := "", args[1:]
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		host, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return 2
	}
	if host == "" && fs.NArg() > 0 {
		host = fs.Arg(0)
	}
	if host == "" {
		fmt.Fprint(stderr, botAuthUsage)
		return 2
	}
	site := botauth.Site{Host: host}
	if *tap != "" {
		site.TAP = strings.Split(*tap, ",")
	}
	if args[0] == "disable" {
		if *tap != "" {
			return fail(stderr, agentvault.Errorf(agentvault.CodeInvalidInput, "disable takes a host only; to drop TAP, enable the host again without --tap"))
		}
		h, err := dropBotAuthSite(ctx, v, cfg.sites(), host)
		if err != nil {
			return fail(stderr, err)
		}
		fmt.Fprintf(stdout, "requests to %s are no longer signed\n", h)
		return 0
	}
	site, err = chooseBotAuthSite(ctx, v, site)
	if err != nil {
		return fail(stderr, err)
	}
	tags := "Web Bot Auth"
	if len(site.TAP) > 0 {
		tags += " and Visa TAP (" + strings.Join(site.TAP, ", ") + ")"
	}
	fmt.Fprintf(stdout, "requests to %s and its subdomains are signed with %s: the site learns it is this agent\n", site.Host, tags)
	if cfg.Directory == "" {
		fmt.Fprintln(stderr, "note: bot_auth.directory is not set in the config, so nothing is signed until it is (dashboard, or a host:port)")
	}
	return 0
}

// chooseBotAuthSite adds a site to the ones the owner chose (`proxyd
// botauth enable`, the dashboard), or gives one already chosen exactly
// these TAP uses. It returns the site as stored.
func chooseBotAuthSite(ctx context.Context, v *vault.Vault, site botauth.Site) (botauth.Site, error) {
	site, err := botauth.NormalizeSite(site)
	if err != nil {
		return botauth.Site{}, err
	}
	sites, err := loadBotAuthSites(ctx, v)
	if err != nil {
		return botauth.Site{}, err
	}
	if i := slices.IndexFunc(sites, func(x botauth.Site) bool { return strings.EqualFold(x.Host, site.Host) }); i >= 0 {
		sites[i] = site
	} else {
		sites = append(sites, site)
	}
	return site, saveBotAuthSites(ctx, v, sites)
}

// dropBotAuthSite removes a site the owner chose. A site the config names
// (configSites) stays signed: the error says to remove it there. It
// returns the host as the sites hold it.
func dropBotAuthSite(ctx context.Context, v *vault.Vault, configSites []botauth.Site, host string) (string, error) {
	site, err := botauth.NormalizeSite(botauth.Site{Host: host})
	if err != nil {
		return "", err
	}
	sites, err := loadBotAuthSites(ctx, v)
	if err != nil {
		return "", err
	}
	i := slices.IndexFunc(sites, func(x botauth.Site) bool { return strings.EqualFold(x.Host, site.Host) })
	inConfig := slices.ContainsFunc(configSites, func(x botauth.Site) bool {
		n, err := botauth.NormalizeSite(x)
		return err == nil && n.Host == site.Host
	})
	if i < 0 && !inConfig {
		return "", agentvault.Errorf(agentvault.CodeNotFound, "%s is not a site requests are signed for (proxyd botauth status lists them)", site.Host)
	}
	if i >= 0 {
		if err := saveBotAuthSites(ctx, v, slices.Delete(sites, i, i+1)); err != nil {
			return "", err
		}
	}
	if inConfig {
		return "", agentvault.Errorf(agentvault.CodeInvalidInput, "%s is in the config's bot_auth.sites: remove it there and reload proxyd (SIGHUP) to stop signing for it", site.Host)
	}
	return site.Host, nil
}

func saveBotAuthSites(ctx context.Context, v *vault.Vault, sites []botauth.Site) error {
	if _, err := botauth.NewRules(sites); err != nil {
		return err
	}
	if sites == nil {
		sites = []botauth.Site{}
	}
	b, _ := json.Marshal(sites)
	return v.SealBlob(ctx, botAuthSitesBlob, b)
}

// rotateBotAuthKey makes a new key the one in use; the old one stays
// published for botauth.RetireAfter(window).
func rotateBotAuthKey(ctx context.Context, v *vault.Vault, window time.Duration, now time.Time) (*botauth.Keyring, error) {
	kr, _, err := loadBotAuth(ctx, v, func() time.Time { return now })
	if err != nil {
		return nil, err
	}
	next, err := kr.Rotate(now, botauth.RetireAfter(window), rand.Reader)
	if err != nil {
		return nil, err
	}
	data := next.InsecureEncode()
	defer clear(data)
	if err := v.SealBlob(ctx, botAuthKeysBlob, data); err != nil {
		return nil, agentvault.Wrap(agentvault.ErrorCode(err), err, "seal the rotated signing keys")
	}
	return next, nil
}

func botAuthStatus(ctx context.Context, v *vault.Vault, cfg BotAuthConfig, stdout, stderr io.Writer) int {
	sites, err := loadBotAuthSites(ctx, v)
	if err != nil {
		return fail(stderr, err)
	}
	switch cfg.Directory {
	case "":
		fmt.Fprintln(stdout, "signing: off (bot_auth.directory is not set)")
	case botAuthDirDashboard:
		fmt.Fprintf(stdout, "directory: on the dashboard listener, %s\n", botauth.DirectoryPath)
	default:
		fmt.Fprintf(stdout, "directory: %s%s\n", cfg.Directory, botauth.DirectoryPath)
	}
	if cfg.AgentOrigin != "" {
		fmt.Fprintf(stdout, "agent origin (Signature-Agent): %s\n", cfg.AgentOrigin)
	}
	fmt.Fprintf(stdout, "window: %s (TAP at most %s)\n", cfg.window(), min(cfg.window(), botauth.MaxTAPWindow))
	rules, err := botauth.NewRules(cfg.sites(), sites)
	if err != nil {
		return fail(stderr, err)
	}
	if len(rules.Sites()) == 0 {
		fmt.Fprintln(stdout, "sites: none (no request is signed)")
	}
	for _, s := range rules.Sites() {
		tap := "-"
		if len(s.TAP) > 0 {
			tap = strings.Join(s.TAP, ",")
		}
		from := "cli"
		if slices.ContainsFunc(cfg.sites(), func(x botauth.Site) bool { n, err := botauth.NormalizeSite(x); return err == nil && n.Host == s.Host }) {
			from = "config"
		}
		fmt.Fprintf(stdout, "site %-40s tap %-12s (%s)\n", s.Host, tap, from)
	}
	kr, err := readBotAuthKeys(ctx, v)
	if err != nil {
		return fail(stderr, err)
	}
	if kr == nil {
		fmt.Fprintln(stdout, "keys: none yet (created at proxyd's first start with bot_auth.directory set)")
		return 0
	}
	now := time.Now()
	for _, k := range kr.Published(now) {
		state := "in use"
		if !k.Retire().IsZero() {
			state = "rotated, published until " + k.Retire().Local().Format(time.RFC3339)
		}
		fmt.Fprintf(stdout, "key %s  created %s  %s\n", k.ID(), k.Created().Local().Format(time.RFC3339), state)
	}
	return 0
}

// readBotAuthKeys reads the keyring without creating one: nil when proxyd
// has not created it yet (its first start with bot_auth.directory set).
func readBotAuthKeys(ctx context.Context, v *vault.Vault) (*botauth.Keyring, error) {
	data, err := v.OpenBlob(ctx, botAuthKeysBlob)
	if agentvault.ErrorCode(err) == agentvault.CodeNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, agentvault.Wrap(agentvault.ErrorCode(err), err, "open the agent's signing keys")
	}
	defer clear(data)
	return botauth.ParseKeyring(data)
}
