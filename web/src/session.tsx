import { createContext, useContext } from 'react';
import type { Account, CreatedKey, Info } from './api.js';

export interface Session {
  info: Info;
  account: Account;
  /** The full default key from the sign-up response: memory only, gone on reload by design. */
  revealedKey: CreatedKey | null;
  forgetRevealedKey: () => void;
  signOut: () => Promise<void>;
}

export const SessionContext = createContext<Session | null>(null);

export function useSession(): Session {
  const s = useContext(SessionContext);
  if (!s) throw new Error('useSession outside a signed-in page');
  return s;
}
