import { useState } from 'preact/hooks';
import { signIn } from './api';

// The token goes once to the panel in the request body and is forgotten: the
// field is cleared, nothing is stored in the page, the URL never holds it.

export function SignIn(props: { onSignedIn: () => void }) {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const input = form.elements.namedItem('token') as HTMLInputElement;
    const token = input.value;
    input.value = '';
    setBusy(true);
    setError(null);
    try {
      await signIn(token);
      props.onSignedIn();
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="sign-in">
      <h1>Tether fleet</h1>
      <form onSubmit={submit} method="post" action="#">
        <label for="token">Operator token</label>
        <input id="token" name="token" type="password" autocomplete="off" required aria-describedby={error ? 'sign-in-error' : undefined} />
        <button type="submit" disabled={busy}>Sign in</button>
        {error && (
          <p id="sign-in-error" class="error" role="alert">
            {error}
          </p>
        )}
      </form>
    </main>
  );
}
