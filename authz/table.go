package authz

// table is every action the appliance serves, by surface. A dashboard or
// control entry is the route pattern exactly as registered with
// net/http's ServeMux; a CLI entry is the command's words.
var table = map[Surface]map[string]Rule{
	Dashboard: {
		// Reachable signed out.
		"GET /style.css":    {Level: Public, What: "load the dashboard's style sheet"},
		"GET /handoff.js":   {Level: Public, What: "load the hand-off script"},
		"GET /handoff.css":  {Level: Public, What: "load the hand-off style sheet"},
		"GET /approvals.js": {Level: Public, What: "load the approvals script"},
		"GET /signin":       {Level: Public, What: "open the sign-in page"},
		"POST /signin":      {Level: Public, What: "sign in"},
		// The agent's key directory (package botauth): sites fetch it to
		// check the agent's signatures; it holds public keys only.
		"GET /.well-known/http-message-signatures-directory": {Level: Public, What: "fetch the agent's public signing keys"},

		// Every signed-in person, for their own things.
		"POST /signout":                      {Level: Person, What: "sign out"},
		"GET /credentials":                   {Level: Person, What: "see their credentials"},
		"POST /credentials/{id}/delete":      {Level: Person, What: "delete a credential"},
		"GET /credentials/enter/{token}":     {Level: Person, What: "open their credential entry link"},
		"POST /credentials/enter":            {Level: Person, What: "save a credential's values"},
		"POST /credentials/keys/{id}/accept": {Level: Person, What: "accept an API key acting for them"},

		// Managers: people and the organisation's shared credentials.
		"POST /credentials/members": {Level: Manager, What: "add members and change roles"},
		"POST /credentials/keys":    {Level: Manager, What: "offer an API key to a member"},

		// The owner alone: what admins may do.
		"GET /delegation":  {Level: OwnerOnly, What: "see what admins may do"},
		"POST /delegation": {Level: OwnerOnly, What: "choose what admins may do"},

		// The owner's powers, each delegable to admins by area.
		"GET /{$}":                   {Level: OwnerOnly, Area: Approvals, What: "see approvals"},
		"POST /approvals/{id}":       {Level: OwnerOnly, Area: Approvals, What: "approve or deny a request"},
		"GET /approvals/live":        {Level: OwnerOnly, Area: Approvals, What: "watch approvals live"},
		"GET /handoffs":              {Level: OwnerOnly, Area: Approvals, What: "see hand-offs"},
		"GET /handoffs/{id}":         {Level: OwnerOnly, Area: Approvals, What: "open a hand-off's live view"},
		"GET /handoffs/{id}/frame":   {Level: OwnerOnly, Area: Approvals, What: "watch a hand-off's page"},
		"POST /handoffs/{id}/input":  {Level: OwnerOnly, Area: Approvals, What: "type into a hand-off's page"},
		"POST /handoffs/{id}/decide": {Level: OwnerOnly, Area: Approvals, What: "end a hand-off"},

		"GET /cards":               {Level: OwnerOnly, Area: Cards, What: "see cards"},
		"GET /cards/new":           {Level: OwnerOnly, Area: Cards, What: "add a card"},
		"POST /cards":              {Level: OwnerOnly, Area: Cards, What: "add a card"},
		"POST /cards/{id}":         {Level: OwnerOnly, Area: Cards, What: "change a card's rules"},
		"POST /cards/{id}/use":     {Level: OwnerOnly, Area: Cards, What: "change where a card may be used"},
		"GET /cards/{id}/remove":   {Level: OwnerOnly, Area: Cards, What: "remove a card"},
		"POST /cards/{id}/remove":  {Level: OwnerOnly, Area: Cards, What: "remove a card"},
		"GET /logins":              {Level: OwnerOnly, Area: Logins, What: "see saved logins"},
		"GET /logins/new":          {Level: OwnerOnly, Area: Logins, What: "add a login"},
		"POST /logins":             {Level: OwnerOnly, Area: Logins, What: "add a login"},
		"GET /logins/{id}/remove":  {Level: OwnerOnly, Area: Logins, What: "remove a login"},
		"POST /logins/{id}/remove": {Level: OwnerOnly, Area: Logins, What: "remove a login"},

		"GET /keys":                    {Level: OwnerOnly, Area: Keys, What: "see API keys"},
		"POST /keys":                   {Level: OwnerOnly, Area: Keys, What: "create an API key"},
		"POST /keys/{id}/scope":        {Level: OwnerOnly, Area: Keys, What: "change an API key's scope"},
		"POST /keys/{id}/revoke":       {Level: OwnerOnly, Area: Keys, What: "revoke an API key"},
		"GET /sites":                   {Level: OwnerOnly, Area: Sites, What: "see authorized sites"},
		"POST /sites":                  {Level: OwnerOnly, Area: Sites, What: "authorize a site"},
		"POST /sites/remove":           {Level: OwnerOnly, Area: Sites, What: "remove an authorized site"},
		"GET /signups":                 {Level: OwnerOnly, Area: Sites, What: "see pre-approved sign-ups"},
		"POST /signups":                {Level: OwnerOnly, Area: Sites, What: "pre-approve a sign-up"},
		"POST /signups/remove":         {Level: OwnerOnly, Area: Sites, What: "remove a pre-approved sign-up"},
		"GET /activity":                {Level: OwnerOnly, Area: Activity, What: "read the activity log"},
		"GET /apps":                    {Level: OwnerOnly, Area: Apps, What: "see connected apps"},
		"POST /apps/sessions/{id}/end": {Level: OwnerOnly, Area: Apps, What: "end a connected app's session"},
		"POST /apps/keys/{id}/uses":    {Level: OwnerOnly, Area: Apps, What: "choose what a connected app may use"},
		"GET /recipes":                 {Level: OwnerOnly, Area: Recipes, What: "review checkout recipes"},
		"POST /recipes/{id}/accept":    {Level: OwnerOnly, Area: Recipes, What: "accept a checkout recipe"},
		"POST /recipes/{id}/reject":    {Level: OwnerOnly, Area: Recipes, What: "reject a checkout recipe"},
		"POST /recipes/{id}/edit":      {Level: OwnerOnly, Area: Recipes, What: "edit a checkout recipe"},
		"GET /notifications":           {Level: OwnerOnly, Area: Notifications, What: "see notification settings"},
		"POST /notifications":          {Level: OwnerOnly, Area: Notifications, What: "change notification settings"},

		// Signed requests: which sites learn the agent's identity is a
		// choice of sites, like authorizing one; the key every site knows
		// the agent by is the owner's alone.
		"GET /signing":               {Level: OwnerOnly, Area: Sites, What: "see which sites the agent's requests are signed for"},
		"POST /signing/sites":        {Level: OwnerOnly, Area: Sites, What: "sign the agent's requests to a site"},
		"POST /signing/sites/remove": {Level: OwnerOnly, Area: Sites, What: "stop signing the agent's requests to a site"},
		"GET /signing/rotate":        {Level: OwnerOnly, What: "rotate the agent's signing key"},
		"POST /signing/rotate":       {Level: OwnerOnly, What: "rotate the agent's signing key"},
	},

	// The control API: mcpd, holding the control token, calls for an
	// agent's key; the service behind each route checks the key and its
	// scope. ForPerson: the call acts for the person the key is bound to.
	// OwnKey: an agent driving its own browser may make the call itself,
	// its API key as the bearer (docs/byob.md), bound to that key.
	Control: {
		"POST /v1/sessions":                {Level: Agent, OwnKey: true, What: "open a proxy session"},
		"GET /v1/catalog":                  {Level: Agent, OwnKey: true, What: "read the token catalog"},
		"GET /v1/payment-integrations":     {Level: Agent, What: "list the payment integrations"},
		"POST /v1/sessions/{id}/authorize": {Level: Agent, OwnKey: true, What: "authorize a token for a page"},
		"POST /v1/sessions/{id}/events":    {Level: Agent, OwnKey: true, What: "report a session event"},
		"GET /v1/sessions/{id}/report":     {Level: Agent, OwnKey: true, What: "read a session's report"},
		"DELETE /v1/sessions/{id}":         {Level: Agent, OwnKey: true, What: "close a session"},
		"GET /v1/waits/{id}":               {Level: Agent, OwnKey: true, What: "wait on the owner's decision"},
		"GET /v1/recipes":                  {Level: Agent, What: "look up checkout recipes"},
		"POST /v1/recipes/submissions":     {Level: Agent, What: "submit a checkout recipe"},
		"GET /v1/recipes/submissions/{id}": {Level: Agent, What: "read a recipe submission"},
		"POST /v1/keys/authenticate":       {Level: Agent, What: "check an API key"},
		"POST /v1/sessions/{id}/handoffs":  {Level: Agent, What: "hand a challenge to the owner"},
		"POST /v1/handoffs/{id}/frame":     {Level: Agent, What: "stream a hand-off's page"},
		"GET /v1/handoffs/{id}/events":     {Level: Agent, What: "read the owner's hand-off input"},
		"POST /v1/handoffs/{id}/end":       {Level: Agent, What: "end a hand-off"},
		"POST /v1/hints/kinds":             {Level: Agent, What: "list page hint kinds"},
		"POST /v1/hints/totp/arm":          {Level: Agent, What: "arm a TOTP enrolment"},
		"POST /v1/hints/totp/take":         {Level: Agent, What: "take a TOTP enrolment"},
		"POST /v1/apps/sessions":           {Level: Agent, What: "report a connection's sessions"},
		"POST /v1/logins/create":           {Level: Agent, What: "create a login"},
		"POST /v1/logins/signup":           {Level: Agent, What: "read a sign-up request"},
		"POST /v1/logins/signup/wait":      {Level: Agent, What: "wait for a sign-up approval"},
		"POST /v1/logins/username":         {Level: Agent, What: "set a login's username"},
		"POST /v1/logins/rotate":           {Level: Agent, What: "rotate a login's password"},
		"POST /v1/credentials/request":     {Level: Agent, ForPerson: true, What: "ask a person for a credential"},
		"POST /v1/credentials/list":        {Level: Agent, ForPerson: true, What: "list a person's credentials"},
		"POST /v1/credentials/use":         {Level: Agent, ForPerson: true, What: "use a person's credential"},
		"POST /v1/credentials/delete":      {Level: Agent, ForPerson: true, What: "delete a person's credential"},
		"POST /v1/credentials/grant":       {Level: Agent, ForPerson: true, What: "share an organisation credential"},
		// The credential-use listener: the one-time token in the body is
		// the proof; whoever holds it gets the values once.
		"POST /v1/credential-use": {Level: Public, What: "redeem a one-time credential link"},
	},

	// The CLI runs on the appliance's host with the data directory (master
	// key included) in reach: its user is the owner.
	CLI: {
		"run":            {Level: Shell, What: "run proxyd"},
		"data-dir":       {Level: Shell, What: "print the data directory"},
		"addresses":      {Level: Shell, What: "print where every listener is"},
		"mcp-config":     {Level: Shell, What: "print an MCP client's config"},
		"doctor":         {Level: Shell, What: "check the installation"},
		"session create": {Level: Shell, What: "open a proxy session by hand"},
		"ca export":      {Level: Shell, What: "export the CA certificate"},

		"vault add-card":     {Level: Shell, What: "add a card"},
		"vault add-login":    {Level: Shell, What: "add a login"},
		"vault add-identity": {Level: Shell, What: "add an identity"},
		"vault add-address":  {Level: Shell, What: "add an address"},
		"vault list":         {Level: Shell, What: "list the vault's items"},
		"vault show":         {Level: Shell, What: "show an item's metadata"},
		"vault remove":       {Level: Shell, What: "remove an item"},
		"vault rotate-key":   {Level: Shell, What: "rotate the master key"},

		"owner set-password":   {Level: Shell, What: "set a dashboard password"},
		"owner create-key":     {Level: Shell, What: "create an API key"},
		"owner keys":           {Level: Shell, What: "list API keys"},
		"owner revoke":         {Level: Shell, What: "revoke an API key"},
		"owner sites":          {Level: Shell, What: "list authorized sites"},
		"owner authorize-site": {Level: Shell, What: "authorize a site"},
		"owner remove-site":    {Level: Shell, What: "remove an authorized site"},
		"owner pending":        {Level: Shell, What: "list pending approvals"},
		"owner approve":        {Level: Shell, What: "approve a request"},
		"owner deny":           {Level: Shell, What: "deny a request"},
		"owner pause-card":     {Level: Shell, What: "pause a card"},
		"owner resume-card":    {Level: Shell, What: "resume a paused card"},
		"owner set-scope":      {Level: Shell, What: "change an API key's scope"},
		"owner signups":        {Level: Shell, What: "list pre-approved sign-ups"},
		"owner add-signup":     {Level: Shell, What: "pre-approve a sign-up"},
		"owner remove-signup":  {Level: Shell, What: "remove a pre-approved sign-up"},
		"owner cards":          {Level: Shell, What: "list cards and their rules"},
		"owner set-card":       {Level: Shell, What: "change a card's rules and sites"},
		"owner export":         {Level: Shell, What: "print the owner's settings as a file"},
		"owner apply":          {Level: Shell, What: "make the owner's settings match a file"},
		"owner notify show":    {Level: Shell, What: "see notification settings"},
		"owner notify on":      {Level: Shell, What: "turn notifications on"},
		"owner notify off":     {Level: Shell, What: "turn notifications off"},

		"botauth status":  {Level: Shell, What: "see which sites the agent's requests are signed for"},
		"botauth enable":  {Level: Shell, What: "sign the agent's requests to a site"},
		"botauth disable": {Level: Shell, What: "stop signing the agent's requests to a site"},
		"botauth rotate":  {Level: Shell, What: "rotate the agent's signing key"},
	},
}
