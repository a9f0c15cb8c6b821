import { render } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { me, signOut } from './api';
import { FleetPage } from './fleet-page';
import { useFleet } from './fleet-stream';
import { NodePage } from './node-page';
import { navigate, usePath } from './router';
import { SignIn } from './sign-in';
import './style.css';

// The fleet page: sign-in, the fleet table and a node's page, with
// client-side paths under /dashboard (the panel serves the same document for
// each).

const NODE_PATH = /^\/dashboard\/nodes\/([^/]+)$/;

function SignedIn(props: { onSignedOut: () => void }) {
  const fleet = useFleet(props.onSignedOut);
  const path = usePath();
  const match = NODE_PATH.exec(path);
  const doSignOut = async () => {
    await signOut().catch(() => undefined);
    props.onSignedOut();
  };
  return (
    <>
      <header class="top">
        <h1>
          <a href="/dashboard" onClick={(e) => { e.preventDefault(); navigate('/dashboard'); }}>Tether fleet</a>
        </h1>
        <span class={`stream ${fleet.connected ? 'live' : 'down'}`} role="status">
          {fleet.connected ? '● live' : '○ reconnecting…'}
        </span>
        <button type="button" onClick={doSignOut}>Sign out</button>
      </header>
      <main>{match ? <NodePage id={decodeURIComponent(match[1]!)} fleet={fleet} /> : <FleetPage fleet={fleet} />}</main>
    </>
  );
}

function App() {
  const [signedIn, setSignedIn] = useState<boolean | null>(null);
  useEffect(() => {
    me().then((m) => setSignedIn(m.signedIn), () => setSignedIn(false));
  }, []);
  const onSignedOut = useCallback(() => setSignedIn(false), []);
  if (signedIn === null) return <p class="loading">Loading…</p>;
  if (!signedIn) return <SignIn onSignedIn={() => setSignedIn(true)} />;
  return <SignedIn onSignedOut={onSignedOut} />;
}

render(<App />, document.getElementById('app')!);
