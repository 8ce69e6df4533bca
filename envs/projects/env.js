/**
 * ProjectTrackerEnv: a software team's project tracker.
 *
 * State (collections keyed by id): teams, users, projects, sprints, tasks, comments, time_logs;
 * counters: next_task_number, next_sprint_number, next_comment_number, next_time_log_number.
 * Dates are YYYY-MM-DD strings read from the virtual clock, so the state of an episode does not
 * depend on how many calls were made during the day.
 */
class ProjectTrackerEnv {
  static POLICY = {
    points: [1, 2, 3, 5, 8, 13],
    wipLimit: 3,
    maxHoursPerLog: 12,
    maxHoursPerDay: 12,
    logEditWindowDays: 14,
    openStatuses: ["todo", "in_progress", "in_review", "blocked"],
    transitions: {
      todo: ["in_progress", "blocked", "cancelled"],
      in_progress: ["in_review", "todo", "blocked", "cancelled"],
      in_review: ["done", "in_progress", "blocked", "cancelled"],
      blocked: ["todo", "in_progress", "cancelled"],
      done: [],
      cancelled: [],
    },
    priorityRank: { critical: 0, high: 1, medium: 2, low: 3 },
  };

  constructor(state) {
    for (const key of Object.keys(state)) this[key] = state[key];
  }

  // ------------------------------------------------------------------ helpers (not tools)

  _today() {
    return new Date().toISOString().slice(0, 10);
  }

  _addDays(date, days) {
    return new Date(Date.parse(`${date}T00:00:00Z`) + days * 864e5).toISOString().slice(0, 10);
  }

  _validDate(s) {
    return typeof s === "string" && /^\d{4}-\d{2}-\d{2}$/.test(s) && !Number.isNaN(Date.parse(`${s}T00:00:00Z`)) &&
      new Date(`${s}T00:00:00Z`).toISOString().slice(0, 10) === s;
  }

  _fail(error) {
    return { success: false, error };
  }

  _nextId(prefix, counterKey) {
    const n = this[counterKey];
    this[counterKey] = n + 1;
    return `${prefix}-${n}`;
  }

  _isOpen(task) {
    return ProjectTrackerEnv.POLICY.openStatuses.includes(task.status);
  }

  _frozenReason(project) {
    if (project.status !== "active") return `Project ${project.project_id} (${project.name}) is ${project.status}; nothing in it can be changed`;
    return null;
  }

  /** The task and its project, or an error result. Pass mutate=true for changes (frozen projects refuse). */
  _taskFor(task_id, mutate) {
    const task = this.tasks[task_id];
    if (!task) return { error: this._fail(`Task ${task_id} not found`) };
    const project = this.projects[task.project_id];
    if (mutate) {
      const frozen = this._frozenReason(project);
      if (frozen) return { error: this._fail(frozen) };
    }
    return { task, project };
  }

  _activeUser(user_id, what) {
    const user = this.users[user_id];
    if (!user) return { error: this._fail(`User ${user_id} not found`) };
    if (!user.active) return { error: this._fail(`User ${user_id} (${user.name}) is deactivated and cannot ${what}`) };
    return { user };
  }

  _inProgressCount(user_id) {
    return Object.values(this.tasks).filter((t) => t.assignee_id === user_id && t.status === "in_progress").length;
  }

  _unresolvedDeps(task) {
    return (task.depends_on || []).filter((id) => {
      const d = this.tasks[id];
      return d && d.status !== "done" && d.status !== "cancelled";
    });
  }

  _committedPoints(sprint_id) {
    return Object.values(this.tasks)
      .filter((t) => t.sprint_id === sprint_id && t.status !== "cancelled")
      .reduce((sum, t) => sum + (t.estimate_points || 0), 0);
  }

  _summary(t) {
    return {
      task_id: t.task_id,
      project_id: t.project_id,
      title: t.title,
      type: t.type,
      priority: t.priority,
      status: t.status,
      assignee_id: t.assignee_id,
      estimate_points: t.estimate_points,
      sprint_id: t.sprint_id,
      due_date: t.due_date,
    };
  }

  _sprintInfo(s) {
    const committed = this._committedPoints(s.sprint_id);
    return { ...s, committed_points: committed, remaining_capacity: s.capacity_points - committed };
  }

  _touch(task) {
    task.updated_date = this._today();
  }

  /** Would task_id reach target_id by following depends_on links? */
  _reaches(task_id, target_id) {
    const seen = {};
    const stack = [task_id];
    while (stack.length) {
      const id = stack.pop();
      if (id === target_id) return true;
      if (seen[id]) continue;
      seen[id] = true;
      const t = this.tasks[id];
      if (t) for (const d of t.depends_on || []) stack.push(d);
    }
    return false;
  }

  // ------------------------------------------------------------------ queries

  list_teams({}) {
    const teams = Object.values(this.teams).map((team) => {
      const members = Object.values(this.users).filter((u) => u.team_id === team.team_id && u.active);
      return { ...team, active_members: members.length };
    });
    return { success: true, data: teams };
  }

  get_team({ team_id }) {
    const team = this.teams[team_id];
    if (!team) return this._fail(`Team ${team_id} not found`);
    const members = Object.values(this.users)
      .filter((u) => u.team_id === team_id)
      .map((u) => ({
        user_id: u.user_id,
        name: u.name,
        role: u.role,
        active: u.active,
        in_progress_tasks: this._inProgressCount(u.user_id),
        open_tasks: Object.values(this.tasks).filter((t) => t.assignee_id === u.user_id && this._isOpen(t)).length,
      }));
    const projects = Object.values(this.projects)
      .filter((p) => p.team_id === team_id)
      .map((p) => ({ project_id: p.project_id, name: p.name, status: p.status }));
    return { success: true, data: { ...team, members, projects } };
  }

  find_users({ name, team_id, role, include_inactive }) {
    const q = name ? name.toLowerCase() : null;
    const users = Object.values(this.users).filter(
      (u) =>
        (include_inactive || u.active) &&
        (!q || u.name.toLowerCase().includes(q)) &&
        (!team_id || u.team_id === team_id) &&
        (!role || u.role === role),
    );
    return { success: true, data: users };
  }

  get_user({ user_id }) {
    const user = this.users[user_id];
    if (!user) return this._fail(`User ${user_id} not found`);
    const open = Object.values(this.tasks)
      .filter((t) => t.assignee_id === user_id && this._isOpen(t))
      .map((t) => this._summary(t));
    return {
      success: true,
      data: { ...user, team_name: this.teams[user.team_id]?.name ?? null, in_progress_tasks: this._inProgressCount(user_id), wip_limit: ProjectTrackerEnv.POLICY.wipLimit, open_tasks: open },
    };
  }

  list_projects({ status, team_id }) {
    const projects = Object.values(this.projects).filter((p) => (!status || p.status === status) && (!team_id || p.team_id === team_id));
    return { success: true, data: projects };
  }

  get_project({ project_id }) {
    const project = this.projects[project_id];
    if (!project) return this._fail(`Project ${project_id} not found`);
    const counts = {};
    for (const t of Object.values(this.tasks)) if (t.project_id === project_id) counts[t.status] = (counts[t.status] || 0) + 1;
    const sprints = Object.values(this.sprints)
      .filter((s) => s.project_id === project_id)
      .map((s) => ({ sprint_id: s.sprint_id, name: s.name, status: s.status, start_date: s.start_date, end_date: s.end_date }));
    return { success: true, data: { ...project, team_name: this.teams[project.team_id]?.name ?? null, task_counts: counts, sprints } };
  }

  search_tasks({ project_id, status, assignee_id, sprint_id, backlog_only, unassigned_only, priority, type, text, label }) {
    const q = text ? text.toLowerCase() : null;
    const tasks = Object.values(this.tasks).filter(
      (t) =>
        (!project_id || t.project_id === project_id) &&
        (!status || t.status === status) &&
        (!assignee_id || t.assignee_id === assignee_id) &&
        (!sprint_id || t.sprint_id === sprint_id) &&
        (!backlog_only || t.sprint_id === null) &&
        (!unassigned_only || t.assignee_id === null) &&
        (!priority || t.priority === priority) &&
        (!type || t.type === type) &&
        (!label || (t.labels || []).includes(label)) &&
        (!q || t.title.toLowerCase().includes(q) || (t.description || "").toLowerCase().includes(q)),
    );
    return { success: true, data: tasks.map((t) => this._summary(t)) };
  }

  get_task({ task_id }) {
    const task = this.tasks[task_id];
    if (!task) return this._fail(`Task ${task_id} not found`);
    const dependencies = (task.depends_on || []).map((id) => ({ task_id: id, title: this.tasks[id]?.title, status: this.tasks[id]?.status }));
    const dependents = Object.values(this.tasks)
      .filter((t) => (t.depends_on || []).includes(task_id))
      .map((t) => ({ task_id: t.task_id, title: t.title, status: t.status }));
    const comments = Object.values(this.comments).filter((c) => c.task_id === task_id);
    const hours = Object.values(this.time_logs)
      .filter((l) => l.task_id === task_id)
      .reduce((s, l) => s + l.hours, 0);
    return { success: true, data: { ...task, dependencies, dependents, comments, hours_logged: hours } };
  }

  list_sprints({ project_id, status }) {
    if (!this.projects[project_id]) return this._fail(`Project ${project_id} not found`);
    const sprints = Object.values(this.sprints)
      .filter((s) => s.project_id === project_id && (!status || s.status === status))
      .map((s) => this._sprintInfo(s));
    return { success: true, data: sprints };
  }

  get_sprint({ sprint_id }) {
    const sprint = this.sprints[sprint_id];
    if (!sprint) return this._fail(`Sprint ${sprint_id} not found`);
    const tasks = Object.values(this.tasks)
      .filter((t) => t.sprint_id === sprint_id)
      .map((t) => this._summary(t));
    return { success: true, data: { ...this._sprintInfo(sprint), tasks } };
  }

  list_time_logs({ task_id, user_id, project_id, from_date, to_date }) {
    const logs = Object.values(this.time_logs).filter(
      (l) =>
        (!task_id || l.task_id === task_id) &&
        (!user_id || l.user_id === user_id) &&
        (!project_id || this.tasks[l.task_id]?.project_id === project_id) &&
        (!from_date || l.date >= from_date) &&
        (!to_date || l.date <= to_date),
    );
    const total = logs.reduce((s, l) => s + l.hours, 0);
    return { success: true, data: { logs, total_hours: total } };
  }

  // ------------------------------------------------------------------ changes

  create_task({ project_id, title, type, priority, reporter_id, description, assignee_id, estimate_points, due_date, labels }) {
    const project = this.projects[project_id];
    if (!project) return this._fail(`Project ${project_id} not found`);
    const frozen = this._frozenReason(project);
    if (frozen) return this._fail(frozen);
    if (!title || !title.trim()) return this._fail("A task needs a non-empty title");
    const rep = this._activeUser(reporter_id, "report tasks");
    if (rep.error) return rep.error;
    if (assignee_id !== undefined) {
      const a = this._activeUser(assignee_id, "be assigned tasks");
      if (a.error) return a.error;
      if (a.user.team_id !== project.team_id) return this._fail(`${a.user.name} is not on the team that owns ${project.name}`);
    }
    if (estimate_points !== undefined && !ProjectTrackerEnv.POLICY.points.includes(estimate_points)) {
      return this._fail(`Estimates must be one of ${ProjectTrackerEnv.POLICY.points.join(", ")} story points`);
    }
    if (due_date !== undefined && !this._validDate(due_date)) return this._fail(`Invalid due date ${due_date}; use YYYY-MM-DD`);
    const task_id = this._nextId("TSK", "next_task_number");
    const today = this._today();
    this.tasks[task_id] = {
      task_id,
      project_id,
      title: title.trim(),
      description: description ?? "",
      type,
      priority,
      status: "todo",
      assignee_id: assignee_id ?? null,
      reporter_id,
      estimate_points: estimate_points ?? null,
      sprint_id: null,
      depends_on: [],
      labels: labels ?? [],
      due_date: due_date ?? null,
      blocked_reason: null,
      cancel_reason: null,
      created_date: today,
      updated_date: today,
      completed_date: null,
    };
    return { success: true, message: `Task ${task_id} created in ${project.name}`, data: this._summary(this.tasks[task_id]) };
  }

  update_task({ task_id, title, description, priority, type, due_date, labels }) {
    const r = this._taskFor(task_id, true);
    if (r.error) return r.error;
    const task = r.task;
    if (!this._isOpen(task)) return this._fail(`Task ${task_id} is ${task.status}; closed tasks cannot be edited`);
    if ([title, description, priority, type, due_date, labels].every((v) => v === undefined)) return this._fail("Nothing to update");
    if (title !== undefined && !title.trim()) return this._fail("The title cannot be empty");
    if (due_date !== undefined && due_date !== null && !this._validDate(due_date)) return this._fail(`Invalid due date ${due_date}; use YYYY-MM-DD`);
    if (title !== undefined) task.title = title.trim();
    if (description !== undefined) task.description = description;
    if (priority !== undefined) task.priority = priority;
    if (type !== undefined) task.type = type;
    if (due_date !== undefined) task.due_date = due_date;
    if (labels !== undefined) task.labels = labels;
    this._touch(task);
    return { success: true, message: `Task ${task_id} updated`, data: this._summary(task) };
  }

  assign_task({ task_id, user_id }) {
    const r = this._taskFor(task_id, true);
    if (r.error) return r.error;
    const { task, project } = r;
    if (!this._isOpen(task)) return this._fail(`Task ${task_id} is ${task.status}; closed tasks cannot be reassigned`);
    const a = this._activeUser(user_id, "be assigned tasks");
    if (a.error) return a.error;
    if (a.user.team_id !== project.team_id) return this._fail(`${a.user.name} is not on the team that owns ${project.name}; only its members can be assigned`);
    if (task.assignee_id === user_id) return this._fail(`Task ${task_id} is already assigned to ${a.user.name}`);
    if (task.status === "in_progress" && this._inProgressCount(user_id) >= ProjectTrackerEnv.POLICY.wipLimit) {
      return this._fail(`${a.user.name} already has ${ProjectTrackerEnv.POLICY.wipLimit} tasks in progress (the WIP limit); task ${task_id} is in progress and cannot be handed to them`);
    }
    const previous = task.assignee_id;
    task.assignee_id = user_id;
    this._touch(task);
    return { success: true, message: `Task ${task_id} assigned to ${a.user.name}${previous ? ` (was ${previous})` : ""}` };
  }

  unassign_task({ task_id }) {
    const r = this._taskFor(task_id, true);
    if (r.error) return r.error;
    const task = r.task;
    if (!this._isOpen(task)) return this._fail(`Task ${task_id} is ${task.status}; closed tasks keep their assignee`);
    if (task.assignee_id === null) return this._fail(`Task ${task_id} has no assignee`);
    if (task.status === "in_progress" || task.status === "in_review") return this._fail(`Task ${task_id} is ${task.status}; tasks in progress or in review must keep an assignee`);
    task.assignee_id = null;
    this._touch(task);
    return { success: true, message: `Task ${task_id} is now unassigned` };
  }

  set_estimate({ task_id, points }) {
    const r = this._taskFor(task_id, true);
    if (r.error) return r.error;
    const task = r.task;
    if (!this._isOpen(task)) return this._fail(`Task ${task_id} is ${task.status}; its estimate can no longer change`);
    if (!ProjectTrackerEnv.POLICY.points.includes(points)) return this._fail(`Estimates must be one of ${ProjectTrackerEnv.POLICY.points.join(", ")} story points`);
    if (task.sprint_id) {
      const sprint = this.sprints[task.sprint_id];
      const after = this._committedPoints(task.sprint_id) - (task.estimate_points || 0) + points;
      if (after > sprint.capacity_points) return this._fail(`With ${points} points, sprint ${sprint.sprint_id} would hold ${after} points, over its capacity of ${sprint.capacity_points}`);
    }
    task.estimate_points = points;
    this._touch(task);
    return { success: true, message: `Task ${task_id} estimated at ${points} points` };
  }

  change_task_status({ task_id, status, reason }) {
    const P = ProjectTrackerEnv.POLICY;
    const r = this._taskFor(task_id, true);
    if (r.error) return r.error;
    const task = r.task;
    const from = task.status;
    if (from === status) return this._fail(`Task ${task_id} is already ${status}`);
    if (!P.transitions[from].includes(status)) {
      const allowed = P.transitions[from];
      return this._fail(`A task cannot go from ${from} to ${status}${allowed.length ? `; from ${from} it may go to: ${allowed.join(", ")}` : `; ${from} is final`}`);
    }
    if ((status === "blocked" || status === "cancelled") && !(reason && reason.trim())) return this._fail(`Moving a task to ${status} requires a reason`);
    if (status === "in_progress" || status === "done" || status === "in_review") {
      const open = this._unresolvedDeps(task);
      if (open.length) return this._fail(`Task ${task_id} depends on unfinished tasks: ${open.map((id) => `${id} (${this.tasks[id].status})`).join(", ")}`);
    }
    if (status === "in_progress") {
      if (!task.assignee_id) return this._fail(`Task ${task_id} has no assignee; assign it before starting work`);
      if (task.estimate_points === null || task.estimate_points === undefined) return this._fail(`Task ${task_id} has no estimate; estimate it before starting work`);
      if (this._inProgressCount(task.assignee_id) >= P.wipLimit) {
        return this._fail(`${this.users[task.assignee_id].name} already has ${P.wipLimit} tasks in progress (the WIP limit)`);
      }
    }
    task.status = status;
    if (status === "blocked") task.blocked_reason = reason.trim();
    else task.blocked_reason = null;
    if (status === "cancelled") task.cancel_reason = reason.trim();
    if (status === "done") task.completed_date = this._today();
    this._touch(task);
    return { success: true, message: `Task ${task_id} moved from ${from} to ${status}` };
  }

  add_dependency({ task_id, depends_on_id }) {
    const r = this._taskFor(task_id, true);
    if (r.error) return r.error;
    const task = r.task;
    const dep = this.tasks[depends_on_id];
    if (!dep) return this._fail(`Task ${depends_on_id} not found`);
    if (task_id === depends_on_id) return this._fail("A task cannot depend on itself");
    if (!this._isOpen(task)) return this._fail(`Task ${task_id} is ${task.status}; its dependencies can no longer change`);
    if (dep.project_id !== task.project_id) return this._fail("Dependencies are only allowed between tasks of the same project");
    if ((task.depends_on || []).includes(depends_on_id)) return this._fail(`Task ${task_id} already depends on ${depends_on_id}`);
    if (this._reaches(depends_on_id, task_id)) return this._fail(`${depends_on_id} already depends (directly or indirectly) on ${task_id}; this would create a cycle`);
    task.depends_on = [...(task.depends_on || []), depends_on_id];
    this._touch(task);
    return { success: true, message: `Task ${task_id} now depends on ${depends_on_id}` };
  }

  remove_dependency({ task_id, depends_on_id }) {
    const r = this._taskFor(task_id, true);
    if (r.error) return r.error;
    const task = r.task;
    if (!this._isOpen(task)) return this._fail(`Task ${task_id} is ${task.status}; its dependencies can no longer change`);
    if (!(task.depends_on || []).includes(depends_on_id)) return this._fail(`Task ${task_id} does not depend on ${depends_on_id}`);
    task.depends_on = task.depends_on.filter((id) => id !== depends_on_id);
    this._touch(task);
    return { success: true, message: `Task ${task_id} no longer depends on ${depends_on_id}` };
  }

  add_task_to_sprint({ task_id, sprint_id }) {
    const r = this._taskFor(task_id, true);
    if (r.error) return r.error;
    const task = r.task;
    const sprint = this.sprints[sprint_id];
    if (!sprint) return this._fail(`Sprint ${sprint_id} not found`);
    if (sprint.project_id !== task.project_id) return this._fail(`Sprint ${sprint_id} belongs to another project than task ${task_id}`);
    if (sprint.status === "closed") return this._fail(`Sprint ${sprint_id} is closed`);
    if (!this._isOpen(task)) return this._fail(`Task ${task_id} is ${task.status}; only open tasks can be planned into a sprint`);
    if (task.sprint_id === sprint_id) return this._fail(`Task ${task_id} is already in sprint ${sprint_id}`);
    if (task.estimate_points === null || task.estimate_points === undefined) return this._fail(`Task ${task_id} has no estimate; only estimated tasks can be planned into a sprint`);
    const after = this._committedPoints(sprint_id) + task.estimate_points;
    if (after > sprint.capacity_points) {
      return this._fail(`Sprint ${sprint_id} has ${sprint.capacity_points - this._committedPoints(sprint_id)} points of capacity left; task ${task_id} needs ${task.estimate_points}`);
    }
    const previous = task.sprint_id;
    task.sprint_id = sprint_id;
    this._touch(task);
    return { success: true, message: `Task ${task_id} added to ${sprint.name}${previous ? ` (moved from ${previous})` : ""}; ${after}/${sprint.capacity_points} points committed` };
  }

  remove_task_from_sprint({ task_id }) {
    const r = this._taskFor(task_id, true);
    if (r.error) return r.error;
    const task = r.task;
    if (!task.sprint_id) return this._fail(`Task ${task_id} is not in a sprint`);
    const sprint = this.sprints[task.sprint_id];
    if (sprint.status === "closed") return this._fail(`Sprint ${sprint.sprint_id} is closed; its tasks stay in it`);
    if (!this._isOpen(task)) return this._fail(`Task ${task_id} is ${task.status}; finished tasks stay in their sprint`);
    task.sprint_id = null;
    this._touch(task);
    return { success: true, message: `Task ${task_id} moved from ${sprint.name} to the backlog` };
  }

  create_sprint({ project_id, name, start_date, end_date, capacity_points }) {
    const project = this.projects[project_id];
    if (!project) return this._fail(`Project ${project_id} not found`);
    const frozen = this._frozenReason(project);
    if (frozen) return this._fail(frozen);
    if (!name || !name.trim()) return this._fail("A sprint needs a name");
    if (!this._validDate(start_date) || !this._validDate(end_date)) return this._fail("Sprint dates must be YYYY-MM-DD");
    if (end_date <= start_date) return this._fail("A sprint must end after it starts");
    if (!Number.isInteger(capacity_points) || capacity_points < 1 || capacity_points > 100) return this._fail("Sprint capacity must be a whole number of points from 1 to 100");
    const sprint_id = this._nextId("SPR", "next_sprint_number");
    this.sprints[sprint_id] = { sprint_id, project_id, name: name.trim(), start_date, end_date, capacity_points, status: "planned", closed_date: null, completed_points: null };
    return { success: true, message: `Sprint ${sprint_id} created`, data: this.sprints[sprint_id] };
  }

  start_sprint({ sprint_id }) {
    const sprint = this.sprints[sprint_id];
    if (!sprint) return this._fail(`Sprint ${sprint_id} not found`);
    const frozen = this._frozenReason(this.projects[sprint.project_id]);
    if (frozen) return this._fail(frozen);
    if (sprint.status !== "planned") return this._fail(`Sprint ${sprint_id} is ${sprint.status}; only planned sprints can be started`);
    const active = Object.values(this.sprints).find((s) => s.project_id === sprint.project_id && s.status === "active");
    if (active) return this._fail(`${active.name} (${active.sprint_id}) is still active; a project can have only one active sprint`);
    sprint.status = "active";
    return { success: true, message: `${sprint.name} started with ${this._committedPoints(sprint_id)}/${sprint.capacity_points} points committed` };
  }

  close_sprint({ sprint_id, carry_over_to }) {
    const sprint = this.sprints[sprint_id];
    if (!sprint) return this._fail(`Sprint ${sprint_id} not found`);
    const frozen = this._frozenReason(this.projects[sprint.project_id]);
    if (frozen) return this._fail(frozen);
    if (sprint.status !== "active") return this._fail(`Sprint ${sprint_id} is ${sprint.status}; only the active sprint can be closed`);
    const unfinished = Object.values(this.tasks).filter((t) => t.sprint_id === sprint_id && this._isOpen(t));
    let target = null;
    if (carry_over_to !== undefined) {
      target = this.sprints[carry_over_to];
      if (!target) return this._fail(`Sprint ${carry_over_to} not found`);
      if (target.project_id !== sprint.project_id) return this._fail(`Sprint ${carry_over_to} belongs to another project`);
      if (target.status !== "planned") return this._fail(`Unfinished work can only be carried over to a planned sprint; ${carry_over_to} is ${target.status}`);
      const moving = unfinished.reduce((s, t) => s + (t.estimate_points || 0), 0);
      const after = this._committedPoints(carry_over_to) + moving;
      if (after > target.capacity_points) {
        return this._fail(`Carrying over ${unfinished.length} unfinished tasks (${moving} points) would put ${target.name} at ${after} points, over its capacity of ${target.capacity_points}; the sprint was not closed`);
      }
    }
    const completed = Object.values(this.tasks)
      .filter((t) => t.sprint_id === sprint_id && t.status === "done")
      .reduce((s, t) => s + (t.estimate_points || 0), 0);
    for (const t of unfinished) {
      t.sprint_id = target ? target.sprint_id : null;
      this._touch(t);
    }
    sprint.status = "closed";
    sprint.closed_date = this._today();
    sprint.completed_points = completed;
    return {
      success: true,
      message: `${sprint.name} closed with ${completed} points completed; ${unfinished.length} unfinished tasks moved to ${target ? target.name : "the backlog"}`,
      data: { moved_tasks: unfinished.map((t) => t.task_id) },
    };
  }

  add_comment({ task_id, author_id, body }) {
    const r = this._taskFor(task_id, true);
    if (r.error) return r.error;
    const a = this._activeUser(author_id, "comment");
    if (a.error) return a.error;
    if (!body || !body.trim()) return this._fail("A comment cannot be empty");
    const comment_id = this._nextId("CMT", "next_comment_number");
    this.comments[comment_id] = { comment_id, task_id, author_id, body: body.trim(), created_date: this._today() };
    return { success: true, message: `Comment ${comment_id} added to ${task_id}` };
  }

  log_time({ task_id, user_id, hours, date, note }) {
    const P = ProjectTrackerEnv.POLICY;
    const r = this._taskFor(task_id, true);
    if (r.error) return r.error;
    const { task, project } = r;
    const a = this._activeUser(user_id, "log time");
    if (a.error) return a.error;
    if (a.user.team_id !== project.team_id) return this._fail(`${a.user.name} is not on the team that owns ${project.name}`);
    if (!["in_progress", "in_review", "done"].includes(task.status)) return this._fail(`Task ${task_id} is ${task.status}; time can only be logged on tasks that are in progress, in review or done`);
    if (!(hours > 0) || hours > P.maxHoursPerLog || Math.round(hours * 4) !== hours * 4) return this._fail(`Hours must be a positive multiple of 0.25, at most ${P.maxHoursPerLog}`);
    const today = this._today();
    const day = date ?? today;
    if (!this._validDate(day)) return this._fail(`Invalid date ${day}; use YYYY-MM-DD`);
    if (day > today) return this._fail("Time cannot be logged for a future date");
    if (day < this._addDays(today, -P.logEditWindowDays)) return this._fail(`Time logs older than ${P.logEditWindowDays} days are locked`);
    const already = Object.values(this.time_logs)
      .filter((l) => l.user_id === user_id && l.date === day)
      .reduce((s, l) => s + l.hours, 0);
    if (already + hours > P.maxHoursPerDay) return this._fail(`${a.user.name} already has ${already} hours logged on ${day}; at most ${P.maxHoursPerDay} per day`);
    const log_id = this._nextId("TL", "next_time_log_number");
    this.time_logs[log_id] = { log_id, task_id, user_id, hours, date: day, note: note ?? "" };
    return { success: true, message: `Logged ${hours} h on ${task_id} for ${a.user.name} (${day}) as ${log_id}` };
  }

  delete_time_log({ log_id }) {
    const log = this.time_logs[log_id];
    if (!log) return this._fail(`Time log ${log_id} not found`);
    const r = this._taskFor(log.task_id, true);
    if (r.error) return r.error;
    if (log.date < this._addDays(this._today(), -ProjectTrackerEnv.POLICY.logEditWindowDays)) return this._fail(`Time logs older than ${ProjectTrackerEnv.POLICY.logEditWindowDays} days are locked`);
    delete this.time_logs[log_id];
    return { success: true, message: `Time log ${log_id} (${log.hours} h on ${log.task_id}, ${log.date}) deleted` };
  }

  deactivate_user({ user_id }) {
    const user = this.users[user_id];
    if (!user) return this._fail(`User ${user_id} not found`);
    if (!user.active) return this._fail(`User ${user_id} is already deactivated`);
    if (Object.values(this.teams).some((t) => t.lead_id === user_id)) return this._fail(`${user.name} leads a team; team leads cannot be deactivated`);
    const open = Object.values(this.tasks).filter((t) => t.assignee_id === user_id && this._isOpen(t));
    if (open.length) return this._fail(`${user.name} still has open tasks: ${open.map((t) => t.task_id).join(", ")}; reassign or close them first`);
    user.active = false;
    user.deactivated_date = this._today();
    return { success: true, message: `${user.name} deactivated` };
  }
}
