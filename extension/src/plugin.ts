/**
 * The JupyterLab plugin: the Argus side panel, its notebook hooks (region cells, kernel execution, the kernel's
 * store), the details view as a main-area tab, links from runs back to their cells, and the cell badges of
 * `%%argus_region` cells.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { KernelMessage } from '@jupyterlab/services';
import { LabIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { ArgusClient, IRegionInfo } from './api';
import { updateBadges } from './badges';
import { regionCells } from './model';
import { ArgusDetails } from './details';
import { ArgusPanel, IKernelOutput, INotebookHooks } from './panel';

const COMMAND_OPEN = 'argus-lab:open-panel';

const argusIcon = new LabIcon({
  name: 'argus-lab:eye',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" width="16"><g class="jp-icon3" fill="#616161">' +
    '<path d="M12 5C6.5 5 2.3 9.1 1 12c1.3 2.9 5.5 7 11 7s9.7-4.1 11-7c-1.3-2.9-5.5-7-11-7zm0 11.5a4.5 4.5 0 1 1 ' +
    '0-9 4.5 4.5 0 0 1 0 9zm0-2.5a2 2 0 1 0 0-4 2 2 0 0 0 0 4z"/></g></svg>'
});

interface ICodeCell {
  widget: Widget & { node: HTMLElement };
  source: string;
  id: string;
}

function codeSources(panel: NotebookPanel): ICodeCell[] {
  const out: ICodeCell[] = [];
  for (const cell of panel.content.widgets) {
    if (cell.model.type === 'code') {
      out.push({ widget: cell, source: cell.model.sharedModel.getSource(), id: cell.model.id });
    }
  }
  return out;
}

/** Evaluate `expression` in the notebook's kernel as a silent user expression; its JSON value, or null. */
async function evaluate(panel: NotebookPanel, expression: string): Promise<unknown> {
  const kernel = panel.sessionContext.session?.kernel;
  if (kernel && kernel.status !== 'idle') {
    // a cell runs (Run All): wait a little for the kernel to be idle, never queue behind a long cell
    await new Promise<void>(resolve => {
      const done = (): void => {
        kernel.statusChanged.disconnect(check);
        window.clearTimeout(timer);
        resolve();
      };
      const check = (): void => {
        if (kernel.status === 'idle') {
          done();
        }
      };
      const timer = window.setTimeout(done, 3000);
      kernel.statusChanged.connect(check);
    });
  }
  if (!kernel || kernel.status !== 'idle') {
    return null;
  }
  const future = kernel.requestExecute({
    code: '',
    silent: true,
    store_history: false,
    allow_stdin: false,
    user_expressions: { argus: expression }
  });
  const reply = await future.done;
  const content = reply.content as { status: string; user_expressions?: Record<string, unknown> };
  const answer = content.user_expressions?.argus as { status?: string; data?: Record<string, unknown> } | undefined;
  if (content.status !== 'ok' || !answer || answer.status !== 'ok' || !answer.data) {
    return null;
  }
  const json = answer.data['application/json'];
  if (json && typeof json === 'object') {
    return json;
  }
  try {
    return JSON.parse(String(answer.data['text/plain'] ?? ''));
  } catch {
    return null;
  }
}

/** The panel's view of a notebook: its region cells and its kernel. */
export function notebookHooks(panel: NotebookPanel): INotebookHooks {
  return {
    name: panel.context.path.split('/').pop() ?? panel.context.path,
    path: panel.context.path,
    regionCells: () => {
      const cells = codeSources(panel);
      return regionCells(
        cells.map(c => c.source),
        cells.map(c => c.id)
      );
    },
    evaluate: (expression: string) => evaluate(panel, expression),
    execute: async (code: string, onOutput: (o: IKernelOutput) => void) => {
      await panel.sessionContext.ready;
      const kernel = panel.sessionContext.session?.kernel;
      if (!kernel) {
        return { status: 'error', error: 'the notebook has no kernel: start one (Kernel > Restart Kernel)' };
      }
      const future = kernel.requestExecute({ code, silent: false, store_history: false, allow_stdin: false });
      let error = '';
      future.onIOPub = (msg: KernelMessage.IIOPubMessage) => {
        if (KernelMessage.isStreamMsg(msg)) {
          onOutput({ text: String(msg.content.text) });
        } else if (
          KernelMessage.isDisplayDataMsg(msg) ||
          KernelMessage.isUpdateDisplayDataMsg(msg) ||
          KernelMessage.isExecuteResultMsg(msg)
        ) {
          onOutput({ data: msg.content.data });
        } else if (KernelMessage.isErrorMsg(msg)) {
          error = `${msg.content.ename}: ${msg.content.evalue}`;
          onOutput({ error });
        }
      };
      const reply = await future.done;
      return { status: reply.content.status, error: error || undefined };
    },
    interrupt: async () => {
      await panel.sessionContext.session?.kernel?.interrupt();
    }
  };
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'argus-lab:panel',
  description: 'The Argus panel: evidence stores, runs, regions, plan and run, cell badges.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker, palette: ICommandPalette | null) => {
    const client = new ArgusClient(app.serviceManager.serverSettings);
    const panel = new ArgusPanel(client, () => (tracker.currentWidget ? notebookHooks(tracker.currentWidget) : null));
    panel.title.icon = argusIcon;
    app.shell.add(panel, 'left', { rank: 900 });

    // a run or a region opens as a main-area tab next to the notebook (wide tables read at the main area's width)
    panel.openDetails = (details: ArgusDetails) => {
      if (!details.isAttached) {
        const ref = tracker.currentWidget?.id;
        app.shell.add(details, 'main', ref ? { ref, mode: 'split-right' } : { mode: 'split-right' });
      }
      app.shell.activateById(details.id);
    };
    // a run's workload links back to its cells: open the notebook, select the cell, scroll to it
    panel.openCell = (path: string, cellId: string) => {
      void (async () => {
        const opened = await app.commands.execute('docmanager:open', { path });
        const nb = (tracker.find(w => w.context.path === path) ?? opened) as NotebookPanel | undefined;
        if (!nb?.content) {
          return;
        }
        await nb.revealed;
        app.shell.activateById(nb.id);
        const index = nb.content.widgets.findIndex(c => c.model.id === cellId);
        if (index < 0) {
          panel.setStatus(`the cell of that run is no longer in ${path} (deleted since)`, true);
          return;
        }
        nb.content.activeCellIndex = index;
        await nb.content.scrollToItem(index, 'center');
        nb.content.widgets[index].node.classList.add('jp-ArgusFlash');
        window.setTimeout(() => nb.content.widgets[index]?.node.classList.remove('jp-ArgusFlash'), 1500);
      })();
    };

    let latest: { regions: IRegionInfo[] } = { regions: [] };
    const openRegion = (path: string): void => {
      void panel.showRegion(path);
    };
    const badgeNotebook = (nb: NotebookPanel | null): void => {
      if (!nb) {
        return;
      }
      const cells = codeSources(nb).map(c => ({ node: c.widget.node, source: c.source }));
      updateBadges(cells, latest.regions, openRegion);
    };
    const badgeAll = (): void => tracker.forEach(nb => badgeNotebook(nb));
    panel.onRegions = regions => {
      latest = { regions };
      badgeAll();
    };

    let timer: number | undefined;
    const soon = (): void => {
      window.clearTimeout(timer);
      timer = window.setTimeout(() => {
        badgeAll();
        panel.renderPicks();
      }, 300);
    };
    tracker.widgetAdded.connect((_, nb) => {
      void nb.revealed.then(() => {
        if (!panel.stores) {
          void panel.refresh();
        }
        soon();
      });
      nb.content.model?.contentChanged.connect(soon);
      nb.content.modelChanged.connect(soon);
    });
    tracker.currentChanged.connect(() => {
      soon();
      panel.notebookChanged();
    });
    // after a cell ran (Run All included), the panel reads the store again: the new runs show up by themselves
    let after: number | undefined;
    NotebookActions.executed.connect(() => {
      window.clearTimeout(after);
      after = window.setTimeout(() => void panel.refresh(), 800);
    });

    app.commands.addCommand(COMMAND_OPEN, {
      label: 'Argus: Open the evidence panel',
      execute: () => {
        app.shell.activateById(panel.id);
        void panel.refresh();
      }
    });
    palette?.addItem({ command: COMMAND_OPEN, category: 'Argus' });
  }
};

export default plugin;
