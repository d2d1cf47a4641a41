/**
 * Cell badges: a `%%argus_region NAME` cell shows its region's latest measured time (a top-level region: its
 * median) or share of its parent's time (a nested one); clicking the badge opens the region's drill-down in the
 * Argus panel.
 */
import { badgeText, IBadgeRegion, regionName, sharesByName } from './model';

export const BADGE_CLASS = 'jp-ArgusBadge';

/** The part of a notebook cell the badges need (a Lumino Cell widget has it). */
export interface IBadgeCell {
  node: HTMLElement;
  source: string;
}

/** Put (or refresh, or remove) the badge of every cell; returns how many badges are shown. */
export function updateBadges(cells: IBadgeCell[], regions: IBadgeRegion[], open: (path: string) => void): number {
  const shares = sharesByName(regions);
  let shown = 0;
  for (const cell of cells) {
    const name = regionName(cell.source);
    const hit = name !== null ? shares.get(name) : undefined;
    let badge = cell.node.querySelector(`:scope > .${BADGE_CLASS}`) as HTMLButtonElement | null;
    if (!hit) {
      badge?.remove();
      cell.node.classList.remove('jp-ArgusHasBadge');
      continue;
    }
    if (!badge) {
      badge = document.createElement('button');
      badge.className = BADGE_CLASS;
      cell.node.appendChild(badge);
      cell.node.classList.add('jp-ArgusHasBadge');
    }
    const path = hit.path;
    const said = badgeText(name as string, hit.region);
    badge.textContent = said.text;
    badge.title = said.title;
    badge.setAttribute('data-path', path);
    badge.onclick = ev => {
      ev.stopPropagation();
      open(path);
    };
    shown++;
  }
  return shown;
}
