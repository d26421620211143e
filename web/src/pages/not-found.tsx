import { EmptyState } from '../components/states.js';
import { Link } from '../router.js';

export function NotFoundPage() {
  return (
    <EmptyState
      title="Page not found"
      action={
        <Link to="/" className="btn btn-secondary">
          Back to overview
        </Link>
      }
    >
      There is nothing at this address.
    </EmptyState>
  );
}
